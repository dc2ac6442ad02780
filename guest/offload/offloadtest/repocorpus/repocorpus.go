// Package repocorpus is the corpus of repository shapes people bring to an
// offload (issue 22, Deliver 2): each shape is made with real git in a
// t.TempDir() by one helper, so the host packer's tests, the box side's
// and the end-to-end ones offload the same repositories. Only tests import
// it.
//
// A shape either offloads and comes back (Outcome Back, perhaps after the
// yes to a warning named by Finding) or is refused with the finding named
// by Finding (Outcome Refused).
package repocorpus

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
)

// Outcome is what an offload of a shape ends in.
type Outcome string

const (
	// Back: the shape offloads, and back brings the box's work home.
	Back Outcome = "back"
	// Refused: the offload is refused (nothing changed) with the finding
	// Shape.Finding.
	Refused Outcome = "refused"
)

// Shape is one repository shape.
type Shape struct {
	// Name is the shape's name, a word fit for a subtest and a directory
	// (clone, shallow, ...).
	Name string
	// About says what the shape is, as a person would describe the
	// repository.
	About string
	// Make makes the shape in a new t.TempDir() and returns the directory
	// an offload runs in (the repository's top; the linked worktree's).
	Make func(t testing.TB) string
	// Outcome is what an offload of the shape ends in.
	Outcome Outcome
	// Finding is the preflight check (Finding.Check) that names the
	// shape: the warning an offload needs a yes for (Outcome Back), or the
	// block (Outcome Refused); empty when none.
	Finding string
}

// The finding checks shapes name (Contract: Offload, Preflight).
const (
	FindingLFSSubmodules = "LFS, submodules"
)

// Shapes is the corpus, in a fixed order.
func Shapes() []Shape {
	return []Shape{
		{Name: "clone", About: "a clone of a bare origin: origin/HEAD, remote branches main, feature/a and fix-b, a local commit ahead and uncommitted work", Make: Clone, Outcome: Back},
		{Name: "clone-fetched", About: "the clone after a git fetch moved origin/main and origin/HEAD follows it", Make: CloneFetched, Outcome: Back},
		{Name: "default-trunk", About: "a clone whose origin's default branch is trunk, not main", Make: DefaultTrunk, Outcome: Back},
		{Name: "shallow", About: "a shallow clone (--depth 1: .git/shallow)", Make: Shallow, Outcome: Back},
		{Name: "linked-worktree", About: "a linked worktree of a clone (git worktree add: .git is a file), on its own branch", Make: LinkedWorktree, Outcome: Back},
		{Name: "submodule", About: "a superproject with a submodule checked out (.gitmodules, .git/modules/)", Make: Submodule, Outcome: Back, Finding: FindingLFSSubmodules},
		{Name: "lfs-pointers", About: "LFS-tracked files (filter=lfs, made with git-lfs) whose work tree holds the pointer files, as a clone with GIT_LFS_SKIP_SMUDGE=1 leaves them", Make: LFSPointers, Outcome: Back, Finding: FindingLFSSubmodules},
		{Name: "lfs-content", About: "LFS-tracked files whose work tree holds their content (git-lfs smudged them): the box has no git-lfs to clean them", Make: LFSContent, Outcome: Refused, Finding: FindingLFSSubmodules},
		{Name: "sparse", About: "a cone-mode sparse checkout (skip-worktree bits in the index) of a clone", Make: Sparse, Outcome: Back},
		{Name: "partially-staged", About: "a file staged at one version and changed again in the work tree", Make: PartiallyStaged, Outcome: Back},
		{Name: "odd-paths", About: "paths with a leading space, a newline, non-UTF-8 bytes, and CRLF content, committed and uncommitted", Make: OddPaths, Outcome: Back},
		{Name: "autocrlf", About: "core.autocrlf=true: LF in the repository, CRLF in the work tree", Make: AutoCRLF, Outcome: Back},
		{Name: "tree-10k", About: "10,000 committed files in 100 directories", Make: Tree10k, Outcome: Back},
		{Name: "status-200k", About: "git status --short of about 200 KiB (2,000 untracked files with long names): the first prompt's attachment that big", Make: Status200k, Outcome: Back},
	}
}

// ByName is the shape of that name; an unknown name fails the test.
func ByName(t testing.TB, name string) Shape {
	t.Helper()
	for _, s := range Shapes() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("repocorpus: no shape %q", name)
	return Shape{}
}

// Git runs git in dir with a test identity, fails the test on an error and
// returns its output as git wrote it (not trimmed).
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return GitEnv(t, dir, nil, args...)
}

// GitEnv is Git with extra environment (NAME=value).
func GitEnv(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=corpus", "-c", "user.email=corpus@invalid", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", "-c", "advice.detachedHead=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("repocorpus: git %q in %s: %v: %s", args, dir, err, out)
	}
	return string(out)
}

// write is offloadtest.Write.
var write = offloadtest.Write

// Origin makes a bare origin with the default branch def and the branches
// feature/a and fix-b beside it, each a commit apart, and returns its path.
func Origin(t testing.TB, def string) string {
	t.Helper()
	root := t.TempDir()
	origin := filepath.Join(root, "origin.git")
	Git(t, root, "init", "-q", "--bare", "-b", def, origin)
	seed := filepath.Join(root, "seed")
	Git(t, root, "clone", "-q", origin, seed)
	Git(t, seed, "checkout", "-q", "-b", def)
	write(t, seed, ".gitignore", "target/\nnode_modules/\n.env\n")
	write(t, seed, "README.md", "# a project\n")
	write(t, seed, "src/main.go", "package main\n\nfunc main() {}\n")
	write(t, seed, "docs/guide.md", "a guide\n")
	Git(t, seed, "add", ".")
	Git(t, seed, "commit", "-q", "-m", "first")
	write(t, seed, "src/lib.go", "package main\n")
	Git(t, seed, "add", ".")
	Git(t, seed, "commit", "-q", "-m", "second")
	Git(t, seed, "push", "-q", "origin", def)
	for _, b := range []string{"feature/a", "fix-b"} {
		Git(t, seed, "checkout", "-q", "-b", b, def)
		write(t, seed, strings.ReplaceAll(b, "/", "-")+".txt", b+"\n")
		Git(t, seed, "add", ".")
		Git(t, seed, "commit", "-q", "-m", b)
		Git(t, seed, "push", "-q", "origin", b)
	}
	return origin
}

// cloneOf clones origin into a new directory named name and adds a local
// commit and uncommitted work (a changed file, an untracked one, an
// ignored .env and target/).
func cloneOf(t testing.TB, origin, name string, args ...string) string {
	t.Helper()
	top := filepath.Join(t.TempDir(), name)
	Git(t, filepath.Dir(top), append(append([]string{"clone", "-q"}, args...), origin, top)...)
	// A git gc --auto that git starts in the background (10,000 loose
	// objects) would still write into .git while t.TempDir's cleanup
	// removes it; in the foreground it is the same gc.
	Git(t, top, "config", "gc.autoDetach", "false")
	write(t, top, "src/local.go", "package main // committed here, not pushed\n")
	Git(t, top, "add", ".")
	Git(t, top, "commit", "-q", "-m", "local")
	write(t, top, "README.md", "# a project\n\nuncommitted here\n")
	write(t, top, "notes.txt", "untracked\n")
	write(t, top, ".env", "TOKEN=never-sent\n")
	write(t, top, "target/out", "built\n")
	return top
}

// Clone is a clone of a bare origin (origin/HEAD → origin/main, the
// remote branches feature/a and fix-b), a commit ahead, uncommitted work.
func Clone(t testing.TB) string { return cloneOf(t, Origin(t, "main"), "clone") }

// CloneFetched is Clone after another clone pushed to main and a git
// fetch moved origin/main (origin/HEAD, a symref, follows it).
func CloneFetched(t testing.TB) string {
	origin := Origin(t, "main")
	top := cloneOf(t, origin, "fetched")
	other := filepath.Join(t.TempDir(), "other")
	Git(t, filepath.Dir(other), "clone", "-q", origin, other)
	write(t, other, "upstream.txt", "pushed by someone else\n")
	Git(t, other, "add", ".")
	Git(t, other, "commit", "-q", "-m", "upstream")
	Git(t, other, "push", "-q", "origin", "main")
	Git(t, top, "fetch", "-q")
	return top
}

// DefaultTrunk is a clone whose origin's default branch is trunk.
func DefaultTrunk(t testing.TB) string { return cloneOf(t, Origin(t, "trunk"), "trunk") }

// Shallow is a --depth 1 clone (file://, since a local path clone ignores
// --depth).
func Shallow(t testing.TB) string {
	return cloneOf(t, "file://"+Origin(t, "main"), "shallow", "--depth", "1", "--no-single-branch")
}

// LinkedWorktree is a worktree of a clone on the new branch work (its
// .git a file), with work staged and unstaged in it.
func LinkedWorktree(t testing.TB) string {
	main := Clone(t)
	top := filepath.Join(t.TempDir(), "worktree")
	Git(t, main, "worktree", "add", "-q", "-b", "work", top)
	write(t, top, "docs/guide.md", "a guide, staged in the worktree\n")
	Git(t, top, "add", "docs/guide.md")
	write(t, top, "src/main.go", "package main\n\n// unstaged in the worktree\nfunc main() {}\n")
	return top
}

// Submodule is a clone with the submodule lib (a repository of its own,
// cloned into .git/modules/lib) committed at path lib.
func Submodule(t testing.TB) string {
	lib := filepath.Join(t.TempDir(), "lib")
	Git(t, filepath.Dir(lib), "init", "-q", lib)
	write(t, lib, "lib.txt", "the library\n")
	Git(t, lib, "add", ".")
	Git(t, lib, "commit", "-q", "-m", "lib")
	top := Clone(t)
	Git(t, top, "submodule", "add", "-q", lib, "lib")
	Git(t, top, "commit", "-q", "-m", "the submodule lib")
	return top
}

// lfsArgs run git-lfs's filters through -c, so no config outside the
// repository changes.
var lfsArgs = []string{"-c", "filter.lfs.clean=git-lfs clean -- %f", "-c", "filter.lfs.smudge=git-lfs smudge -- %f", "-c", "filter.lfs.process=git-lfs filter-process", "-c", "filter.lfs.required=true"}

// lfsClone is a clone with assets/model.bin committed through git-lfs
// (Debian's), its content still in the work tree.
func lfsClone(t testing.TB) string {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Fatalf("repocorpus: git-lfs is not installed (tests/setup-host installs Debian's git-lfs): %v", err)
	}
	top := Clone(t)
	write(t, top, ".gitattributes", "*.bin filter=lfs diff=lfs merge=lfs -text\n")
	write(t, top, "assets/model.bin", strings.Repeat("\x00\x01binary", 1000))
	Git(t, top, append(lfsArgs, "add", ".gitattributes", "assets/model.bin")...)
	Git(t, top, append(lfsArgs, "commit", "-q", "-m", "an LFS file")...)
	return top
}

// LFSContent is lfsClone: the LFS file's content in the work tree, its
// object in .git/lfs.
func LFSContent(t testing.TB) string { return lfsClone(t) }

// LFSPointers is a clone with *.bin tracked by git-lfs (Debian's git-lfs,
// run through -c so no config outside the repository changes) and the
// work tree holding their pointer files, as GIT_LFS_SKIP_SMUDGE=1 leaves
// them.
func LFSPointers(t testing.TB) string {
	top := lfsClone(t)
	if err := os.Remove(filepath.Join(top, "assets/model.bin")); err != nil {
		t.Fatal(err)
	}
	GitEnv(t, top, []string{"GIT_LFS_SKIP_SMUDGE=1"}, append(lfsArgs, "checkout", "--", "assets/model.bin")...)
	if got, _ := os.ReadFile(filepath.Join(top, "assets/model.bin")); !strings.HasPrefix(string(got), "version https://git-lfs.github.com/spec/v1\n") {
		t.Fatalf("repocorpus: assets/model.bin is not a pointer file: %.80q", got)
	}
	return top
}

// Sparse is a clone in a cone-mode sparse checkout of src/ (docs/ and the
// branches' files outside the cone carry skip-worktree bits).
func Sparse(t testing.TB) string {
	top := Clone(t)
	Git(t, top, "stash", "-q", "-u") // sparse-checkout set wants a clean tree
	Git(t, top, "sparse-checkout", "set", "--cone", "src")
	Git(t, top, "stash", "pop", "-q")
	if _, err := os.Stat(filepath.Join(top, "docs/guide.md")); err == nil {
		t.Fatal("repocorpus: docs/guide.md is in the sparse work tree")
	}
	return top
}

// PartiallyStaged has src/main.go staged at one version (a blob no commit
// names) and changed again in the work tree.
func PartiallyStaged(t testing.TB) string {
	top := Clone(t)
	write(t, top, "src/main.go", "package main\n\n// staged\nfunc main() {}\n")
	Git(t, top, "add", "src/main.go")
	write(t, top, "src/main.go", "package main\n\n// staged\n// and then unstaged\nfunc main() {}\n")
	return top
}

// The odd paths OddPaths makes.
const (
	LeadingSpace = " n.txt"
	Newline      = "new\nline.txt"
	NonUTF8      = "caf\xe9-\xff.txt"
	CRLF         = "crlf.txt"
)

// OddPaths is a clone with a committed path that starts with a space, one
// holding a newline, one of non-UTF-8 bytes and a file of CRLF lines; then
// each of them changed uncommitted, and new ones untracked.
func OddPaths(t testing.TB) string {
	top := Clone(t)
	for _, p := range []string{LeadingSpace, Newline, NonUTF8} {
		write(t, top, p, "committed\n")
	}
	write(t, top, CRLF, "one\r\ntwo\r\n")
	Git(t, top, "add", ".")
	Git(t, top, "commit", "-q", "-m", "odd paths")
	for _, p := range []string{LeadingSpace, Newline, NonUTF8} {
		write(t, top, p, "changed, uncommitted\n")
		write(t, top, "new/"+p, "untracked\n")
	}
	write(t, top, CRLF, "one\r\ntwo\r\nthree, uncommitted\r\n")
	return top
}

// AutoCRLF is a clone with core.autocrlf=true, text files committed with
// LF and checked out with CRLF, one changed uncommitted.
func AutoCRLF(t testing.TB) string {
	top := Clone(t)
	Git(t, top, "config", "core.autocrlf", "true")
	write(t, top, "text.txt", "one\ntwo\n")
	Git(t, top, "add", "text.txt")
	Git(t, top, "commit", "-q", "-m", "text")
	if err := os.Remove(filepath.Join(top, "text.txt")); err != nil {
		t.Fatal(err)
	}
	Git(t, top, "checkout", "--", "text.txt")
	if got, _ := os.ReadFile(filepath.Join(top, "text.txt")); string(got) != "one\r\ntwo\r\n" {
		t.Fatalf("repocorpus: autocrlf checked out %q", got)
	}
	write(t, top, "README.md", "# a project\r\n\r\nchanged with CRLF\r\n")
	return top
}

// Tree10k is a clone with 10,000 small files in 100 directories
// committed, and one of them changed.
func Tree10k(t testing.TB) string {
	top := Clone(t)
	for d := 0; d < 100; d++ {
		dir := filepath.Join(top, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), []byte(fmt.Sprintf("file %d/%d\n", d, f)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	Git(t, top, "add", ".")
	Git(t, top, "commit", "-q", "-m", "10,000 files")
	write(t, top, "d00/f00.txt", "changed\n")
	return top
}

// Status200k is a clone with 2,000 untracked files whose names are about
// 100 bytes each: git status --short prints about 200 KiB.
func Status200k(t testing.TB) string {
	top := Clone(t)
	dir := filepath.Join(top, "generated")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 80)
	for i := 0; i < 2000; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%05d.txt", pad, i)), []byte("generated\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(GitEnv(t, top, nil, "status", "--short", "--untracked-files=all")); n < 200*1024 {
		t.Fatalf("repocorpus: git status --short is %d bytes, want at least 200 KiB", n)
	}
	return top
}
