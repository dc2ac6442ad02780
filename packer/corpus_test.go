package packer

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest/repocorpus"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Issue 22, Deliver 2: every shape of the corpus through the host
// packer's own steps, with a local directory for the box's copy (the
// booted round is tests/offload's TestOffloadAndBack/Corpus): the findings name the
// shape; a refused shape is blocked; any other is copied with the
// contract's rsync and the packer's excludes, its history added as the
// bundle would, checked as the box checks it (the copy's snapshot is S's
// tree, its HEAD S's parent), changed as an agent would (a commit and an
// uncommitted file), and merged back, the user's uncommitted work kept.
func TestCorpusThroughTheHostPacker(t *testing.T) {
	for _, shape := range repocorpus.Shapes() {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel() // git runs in processes: both cores
			top := shape.Make(t)
			repo, err := FindRepo(top)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := HostFindings(top, offloadtest.Handover("corpus"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if shape.Finding != "" && !hasCheck(findings, shape.Finding, "") {
				t.Fatalf("no %q finding: %+v", shape.Finding, findings)
			}
			if shape.Outcome == repocorpus.Refused {
				if !hasCheck(findings, shape.Finding, Block) {
					t.Fatalf("%s is not blocked: %+v", shape.Name, findings)
				}
				return
			}
			if blocked(findings) {
				t.Fatalf("%s is blocked: %+v", shape.Name, findings)
			}
			p := testPacker(t)
			if err := p.Dirs.Ensure(repo.Key); err != nil {
				t.Fatal(err)
			}
			excludes, err := p.writeExcludes(repo, verbResult{resp: map[string]any{"ignored": []any{}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := gitcmd.Snapshot(top, "S", false)
			if err != nil {
				t.Fatal(err)
			}
			id := "off-corpus"
			git(t, top, "update-ref", "refs/cocoonbox/base/"+id, s)
			before := read(t, top, "README.md")

			copyDir := boxCopy(t, repo, excludes)
			if got, want := must(gitcmd.SnapshotTree(copyDir)), git(t, top, "rev-parse", s+"^{tree}"); got != want {
				t.Fatalf("the copy's snapshot %s is not S's tree %s:\n%s", got, want, git(t, copyDir, "status", "--porcelain"))
			}
			if got, want := git(t, copyDir, "rev-parse", "HEAD"), git(t, top, "rev-parse", s+"^"); got != want {
				t.Fatalf("the copy's HEAD %s is not S's parent %s", got, want)
			}
			// The bundle left S's own blobs out (they travel once, by
			// rsync); the check's snapshot wrote them, so nothing is missing.
			if _, err := gitcmd.Run(copyDir, nil, nil, "fsck", "--connectivity-only", "--no-dangling"); err != nil {
				t.Fatalf("the copy lacks objects after the check: %v", err)
			}

			// The agent's turn, then post --back's S′.
			write(t, copyDir, "work.txt", "the agent's\n")
			git(t, copyDir, "add", "work.txt")
			git(t, copyDir, "commit", "-q", "-m", "agent")
			write(t, copyDir, "later.txt", "uncommitted by the agent\n")
			sp, err := gitcmd.Snapshot(copyDir, "S′", true)
			if err != nil {
				t.Fatal(err)
			}
			git(t, copyDir, "update-ref", "refs/cocoonbox/back/"+id, sp)
			git(t, top, "fetch", "-q", copyDir, "+refs/heads/*:refs/cocoonbox/box/*", "+refs/cocoonbox/back/"+id+":refs/cocoonbox/back/"+id)
			branch := strings.TrimPrefix(git(t, top, "symbolic-ref", "HEAD"), "refs/heads/")
			m, err := Merge(MergeInput{Top: top, ID: id, S: s, SPrime: sp, BoxHead: git(t, top, "rev-parse", "refs/cocoonbox/box/"+branch), Now: time.Now()})
			if err != nil {
				t.Fatalf("back: %v", err)
			}
			if m.Case != CaseFastForward || m.MovedTo == "" {
				t.Errorf("back: %+v, want the fast-forward moving the branch", m)
			}
			if got := git(t, top, "log", "-1", "--format=%s"); got != "agent" {
				t.Errorf("HEAD is %q, want the agent's commit", got)
			}
			lf := func(f string) string { return strings.ReplaceAll(read(t, top, f), "\r\n", "\n") } // core.autocrlf checks out CRLF
			if lf("work.txt") != "the agent's\n" || lf("later.txt") != "uncommitted by the agent\n" || read(t, top, "README.md") != before {
				t.Errorf("the work tree after back: work.txt %q, later.txt %q, README.md %q", read(t, top, "work.txt"), read(t, top, "later.txt"), read(t, top, "README.md"))
			}
			if st := git(t, top, "status", "--porcelain"); strings.Contains(st, "work.txt") || strings.Contains(st, "D ") {
				t.Errorf("the status after back:\n%s", st)
			}
		})
	}
}

// boxCopy is the box's copy as send leaves it: the packer's rsync
// arguments (rsyncFilter) with its excludes into a new directory (a linked worktree without
// its .git, its HEAD and index put in a fresh .git as the stream does),
// and the repository's objects and refs where the bundle puts them.
func boxCopy(t *testing.T, repo Repo, excludes string, hide ...string) string {
	t.Helper()
	return boxCopyAt(t, t.TempDir(), repo, excludes, hide...)
}

// boxCopyAt is boxCopy into dst, which may hold an earlier copy.
func boxCopyAt(t *testing.T, dst string, repo Repo, excludes string, hide ...string) string {
	t.Helper()
	run(t, "rsync", append(rsyncFilter(repo, excludes, hide), repo.Top+"/", dst+"/")...)
	common := must(gitcmd.Run(repo.Top, nil, nil, "rev-parse", "--path-format=absolute", "--git-common-dir"))
	if repo.Linked {
		git(t, dst, "init", "-q")
		for _, f := range []string{"HEAD", "index"} {
			run(t, "cp", must(gitcmd.GitPath(repo.Top, f)), filepath.Join(dst, ".git", f))
		}
		run(t, "cp", "-a", filepath.Join(common, "refs"), filepath.Join(common, "packed-refs"), filepath.Join(dst, ".git"))
	}
	// The history as the bundle carries it (makeBundle, nothing in the
	// box yet, S's own blobs left to the check), indexed as the box's send
	// does.
	bundle := filepath.Join(t.TempDir(), "offload.bundle")
	sRef, _ := gitcmd.Run(repo.Top, nil, nil, "for-each-ref", "--count=1", "--format=%(refname)", "refs/cocoonbox/base/")
	if ok, err := makeBundle(repo.Top, bundle, nil, sRef); err != nil || !ok {
		t.Fatalf("the bundle: %v %v", ok, err)
	}
	git(t, dst, "init", "-q")
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	_, pack, _ := bytes.Cut(data, []byte("\n\n"))
	if _, err := gitcmd.Run(dst, nil, bytes.NewReader(pack), "index-pack", "--stdin", "--fix-thin"); err != nil {
		t.Fatal(err)
	}
	for _, never := range []string{".git/lfs", ".git/modules", ".git/index.lock"} {
		if _, err := os.Lstat(filepath.Join(dst, never)); err == nil {
			t.Errorf("%s was carried", never)
		}
	}
	git(t, dst, "update-index", "-q", "--refresh")
	return dst
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v: %s", name, args, err, out)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func hasCheck(fs []Finding, check, outcome string) bool {
	for _, f := range fs {
		if f.Check == check && (outcome == "" || f.Outcome == outcome) {
			return true
		}
	}
	return false
}

// Issue 22: an opted-in file: secret that is not git-ignored went to the
// box by rsync and into S's tree (Contract: Offload, Secrets: never by
// rsync); and a transient .git/index.lock travelled into the box. The
// secret goes only in the stream: rsync leaves it out, S leaves it out,
// and back never writes the box's link to its tmpfs over it. A tracked
// one is refused, its content being in the history.
func TestFileSecretAndLockNeverByRsync(t *testing.T) {
	top := repocorpus.Clone(t)
	repo, _ := FindRepo(top)
	write(t, top, "config/secret.json", `{"token":"S3CR3T"}`+"\n")
	write(t, top, ".git/index.lock", "a git running now\n")
	secret := []string{"file:config/secret.json"}
	paths, err := fileSecretPaths(top, secret)
	if err != nil || len(paths) != 1 {
		t.Fatalf("fileSecretPaths: %v %v", paths, err)
	}
	p := testPacker(t)
	p.Dirs.Ensure(repo.Key)
	excludes, err := p.writeExcludes(repo, verbResult{resp: map[string]any{}}, paths)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gitcmd.Snapshot(top, "S", false, paths...)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(top, ".git/index.lock"))
	if ls := git(t, top, "ls-tree", "-r", "--name-only", s); strings.Contains(ls, "secret.json") || !strings.Contains(ls, "notes.txt") {
		t.Errorf("S's tree:\n%s\nwant notes.txt (untracked) and no secret", ls)
	}
	write(t, top, ".git/index.lock", "a git running now\n")
	copyDir := boxCopy(t, repo, excludes)
	os.Remove(filepath.Join(top, ".git/index.lock"))
	if _, err := os.Lstat(filepath.Join(copyDir, "config/secret.json")); err == nil {
		t.Error("rsync carried the secret")
	}
	// The box's copy: the secret a link to the tmpfs, in S′ as the box's
	// post --back makes it; back leaves the host's file alone.
	os.Symlink("/run/cocoonbox-offload/secrets/k/file/config/secret.json", filepath.Join(copyDir, "config/secret.json"))
	write(t, copyDir, "work.txt", "the agent's\n")
	sp, _ := gitcmd.Snapshot(copyDir, "S′", true)
	git(t, copyDir, "update-ref", "refs/cocoonbox/back/x", sp)
	git(t, top, "fetch", "-q", copyDir, "+refs/cocoonbox/back/x:refs/cocoonbox/back/x")
	m, err := Merge(MergeInput{Top: top, ID: "x", S: s, SPrime: sp, Now: time.Now(), Keep: paths})
	if err != nil || m.Case != CaseFastForward {
		t.Fatalf("back: %v %+v", err, m)
	}
	if got := read(t, top, "config/secret.json"); !strings.Contains(got, "S3CR3T") || read(t, top, "work.txt") != "the agent's\n" {
		t.Errorf("after back the secret is %q", got)
	}
	git(t, top, "add", "-f", "config/secret.json")
	if _, err := fileSecretPaths(top, secret); err == nil || !strings.Contains(err.Error(), "is tracked by git") {
		t.Errorf("a tracked secret: %v, want a refusal", err)
	}
}

// An opted-in file: secret that is git-ignored (the usual .env) is left
// out of S as git leaves it out (git add refused a pathspec naming it).
func TestIgnoredFileSecretLeftOutOfS(t *testing.T) {
	top := repocorpus.Clone(t)
	s, err := gitcmd.Snapshot(top, "S", false, ".env")
	if err != nil {
		t.Fatal(err)
	}
	if ls := git(t, top, "ls-tree", "-r", "--name-only", s); strings.Contains(ls, ".env") {
		t.Errorf("S has the ignored .env:\n%s", ls)
	}
}
