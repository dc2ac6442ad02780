package packer

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// What rsync never carries into the box besides the ignored paths
// (Contract: Offload, "Offload, Mac side", and Preflight's "LFS,
// submodules: warn: not carried"): the history (.git/objects/, which
// travels as the bundle), LFS objects (.git/lfs/), submodules (their
// history in .git/modules/ and their work trees, so the box's copy has
// each submodule empty, as an uninitialised one), git's transient
// *.lock files (a running git's index.lock would be taken for a crashed
// one's in the box), and opted-in file: secrets (never by rsync: they go
// in the stream).
// (.git/objects/ is rsync's own --exclude, as the contract writes it.)
var notCarried = []string{"/.git/lfs/", "/.git/modules/", "/.git/**.lock"}

// lfsPointer is how every Git LFS pointer file begins.
const lfsPointer = "version https://git-lfs.github.com/spec/v1\n"

// submodules is the repository's gitlink paths (mode 160000 in the
// index).
func submodules(top string) ([]string, error) {
	entries, err := gitcmd.Paths(top, nil, nil, "ls-files", "-z", "-s")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if meta, p, ok := strings.Cut(e, "\t"); ok && strings.HasPrefix(meta, "160000 ") {
			out = append(out, p)
		}
	}
	return out, nil
}

// lfsContent is the LFS-tracked files (filter=lfs) whose work tree holds
// their content rather than a pointer file: the box has no git-lfs, so
// its git would store the content where S has the pointer, and the copy
// would never equal S.
func lfsContent(top string, files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	out, err := gitcmd.Paths(top, nil, strings.NewReader(strings.Join(files, "\x00")+"\x00"), "check-attr", "-z", "--stdin", "filter")
	if err != nil {
		return nil, err
	}
	var content []string
	// -z: path, attribute, value, each NUL-terminated.
	for i := 0; i+2 < len(out); i += 3 {
		if out[i+2] != "lfs" {
			continue
		}
		f, err := os.Open(filepath.Join(top, out[i]))
		if err != nil {
			continue
		}
		head := make([]byte, len(lfsPointer))
		n, _ := io.ReadFull(f, head)
		f.Close()
		if string(head[:n]) != lfsPointer {
			content = append(content, out[i])
		}
	}
	return content, nil
}

// carriedFindings is Preflight's "LFS, submodules": a warning that they
// are not carried (notCarried), and a block when LFS files hold their
// content here, which the box (no git-lfs) cannot take.
func carriedFindings(rf *repoFiles) []Finding {
	var fs []Finding
	lfs := false
	for _, f := range rf.files {
		if path.Base(f) == ".gitattributes" && strings.Contains(rf.read(f), "filter=lfs") {
			lfs = true
			fs = append(fs, offload.Found("LFS, submodules", Warn, f+" has filter=lfs: LFS objects (.git/lfs) are not carried; the box takes the pointer files as they are"))
		}
	}
	if lfs {
		content, err := lfsContent(rf.top, rf.files)
		if err != nil {
			fs = append(fs, offload.Found("LFS, submodules", Block, "git check-attr: "+err.Error()))
		} else if len(content) > 0 {
			fs = append(fs, offload.Found("LFS, submodules", Block, fmt.Sprintf("%s hold LFS content, not pointer files: the box has no git-lfs, so its copy could not equal S; offload a checkout made with GIT_LFS_SKIP_SMUDGE=1", strings.Join(first(content, 5), ", "))))
		}
	}
	subs, _ := submodules(rf.top)
	for _, f := range rf.files {
		if f == ".gitmodules" || len(subs) > 0 {
			what := "submodules stay"
			if len(subs) > 0 {
				what = strings.Join(first(subs, 5), ", ") + " stay"
			}
			fs = append(fs, offload.Found("LFS, submodules", Warn, ".gitmodules: submodules are not carried: in the box's copy "+what+" empty (uninitialised), and a change in them cannot come back"))
			break
		}
	}
	return fs
}

// excludeLines are rsync's exclude lines besides the ignored paths:
// notCarried, each submodule's contents, and the opted-in file: secrets,
// their paths matched literally.
func excludeLines(top string, secretPaths []string) ([]string, error) {
	lines := append([]string{}, notCarried...)
	subs, err := submodules(top)
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		lines = append(lines, "/"+offload.RsyncEscape(s)+"/*")
	}
	for _, p := range secretPaths {
		lines = append(lines, "/"+offload.RsyncLiteral(p))
	}
	return lines, nil
}

// fileSecretPaths is the repo paths of the opted-in file: entries. A
// tracked one is refused: its content is in the history the bundle
// carries.
func fileSecretPaths(top string, entries []string) ([]string, error) {
	var out []string
	for _, e := range entries {
		p, ok := strings.CutPrefix(e, "file:")
		if !ok {
			continue
		}
		if tracked, _ := gitcmd.Paths(top, nil, nil, "ls-files", "-z", "--", ":(literal)"+p); len(tracked) > 0 {
			return nil, &Refusal{Msg: fmt.Sprintf("secret %s: %s is tracked by git, so its content travels in the history (secrets never do): untrack it (git rm --cached, and ignore it) or cocoonbox offload secrets remove %s", e, p, e)}
		}
		out = append(out, p)
	}
	return out, nil
}

// linkedWorktrees is each linked worktree inside the work tree: an
// untracked directory whose .git is a file. Its .git names a directory of
// this machine's .git, which the box lacks, so there the copy could never
// equal S: rsync hides it (and deletes it from the box's copy), S leaves
// it out, back never writes it, and stderr names it.
func (p *Packer) linkedWorktrees(repo Repo) ([]string, error) {
	// git lists a nested repository as its directory, with a slash, and
	// does not look inside it.
	untracked, err := gitcmd.Paths(repo.Top, nil, nil, "ls-files", "-z", "-o", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range untracked {
		dir, ok := strings.CutSuffix(u, "/")
		if !ok {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(repo.Top, dir, ".git")); err == nil && fi.Mode().IsRegular() {
			p.Progress.Printf("%s is a linked worktree (its .git names a directory on this machine): it is not sent, and back leaves it as it is", dir)
			out = append(out, dir)
		}
	}
	return out, nil
}
