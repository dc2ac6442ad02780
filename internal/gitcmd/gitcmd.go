// Package gitcmd runs git for both offload packers, the box's
// (guest/offload/verbs) and the host's (packer), so the two take the same
// snapshot S and S′ of a work tree the same way (Contract: Offload, send
// steps and Back, Mac side).
package gitcmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Run runs git in dir with extra environment (NAME=value entries) and
// stdin, and returns its stdout with surrounding space trimmed. A failure
// carries git's arguments and stderr (and wraps its *exec.ExitError);
// nothing git prints reaches the caller's own stdout. It gives up after
// 10 minutes.
func Run(dir string, env []string, stdin io.Reader, args ...string) (string, error) {
	out, err := Raw(dir, env, stdin, args...)
	return strings.TrimSpace(string(out)), err
}

// Raw is Run's stdout as git wrote it (a patch keeps its last blank
// context line).
func Raw(dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// Paths runs git with -z output and splits it at each NUL as git wrote
// it: a name is never trimmed (Run would cut the leading space of a first
// path " n.txt", or the newline of a last one). Empty entries are
// dropped.
func Paths(dir string, env []string, stdin io.Reader, args ...string) ([]string, error) {
	out, err := Raw(dir, env, stdin, args...)
	if err != nil {
		return nil, err
	}
	paths := []string{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Refs is the repository's refs as {"<ref>":"<oid>"} (begin's refs field),
// leaving out a ref whose object the repository lacks: a copy that rsync
// filled before its bundle came (an offload killed mid-way) has the host's
// refs without their objects, and a host that bundled --not those would
// send a bundle the copy cannot take. A repository git cannot read has
// none.
func Refs(dir string) map[string]string {
	out := map[string]string{}
	s, err := Run(dir, nil, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil || s == "" {
		return out
	}
	lines := strings.Split(s, "\n")
	var oids strings.Builder
	for _, l := range lines {
		oid, _, _ := strings.Cut(l, " ")
		oids.WriteString(oid + "\n")
	}
	have, err := Run(dir, nil, strings.NewReader(oids.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return out
	}
	present := map[string]bool{}
	for _, l := range strings.Split(have, "\n") {
		if oid, typ, _ := strings.Cut(l, " "); typ != "missing" && oid != "" {
			present[oid] = true
		}
	}
	for _, l := range lines {
		if oid, ref, ok := strings.Cut(l, " "); ok && present[oid] {
			out[ref] = oid
		}
	}
	return out
}

// Ignored is `git ls-files -oi --exclude-standard --directory` in dir:
// the git-ignored files and directories (a directory ends in /), relative
// to dir.
func Ignored(dir string) ([]string, error) {
	return Paths(dir, nil, nil, "ls-files", "-z", "-oi", "--exclude-standard", "--directory")
}

// IgnoredDirs is Ignored's directories only (begin's ignored, and the
// state excludes).
func IgnoredDirs(dir string) []string {
	all, _ := Ignored(dir)
	out := []string{}
	for _, l := range all {
		if strings.HasSuffix(l, "/") {
			out = append(out, l)
		}
	}
	return out
}

// SnapshotTree is the tree of the work tree as it is, staged, unstaged
// and untracked (not ignored) alike, written through a temporary copy of
// the index so the repository's own index stays as it was; the untracked
// paths of except (the host's opted-in file: secrets) are left out.
func SnapshotTree(dir string, except ...string) (string, error) {
	index, err := Run(dir, nil, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp("", "cocoonbox-offload-index-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if idx, err := os.ReadFile(index); err == nil {
		if err := os.WriteFile(tmp.Name(), idx, 0o600); err != nil {
			return "", err
		}
	} else {
		os.Remove(tmp.Name())
	}
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	args := []string{"-c", "core.fsmonitor=false", "add", "-A"}
	if len(except) > 0 {
		// An ignored path is left out anyway, and git add refuses a
		// pathspec that names one: only the others are excluded.
		out, _ := Raw(dir, nil, strings.NewReader(strings.Join(except, "\x00")+"\x00"), "check-ignore", "-z", "--stdin")
		ignored := map[string]bool{}
		for _, p := range strings.Split(string(out), "\x00") {
			ignored[p] = true
		}
		args = append(args, "--", ".")
		for _, p := range except {
			if !ignored[p] {
				args = append(args, ":(exclude,literal)"+p)
			}
		}
	}
	if _, err := Run(dir, env, nil, args...); err != nil {
		return "", err
	}
	return Run(dir, env, nil, "write-tree")
}

// Snapshot commits SnapshotTree (leaving out except) with HEAD as its parent (none on an
// unborn branch) and returns the commit. With reuseHead, a tree equal to
// HEAD's is HEAD itself (the box's S′); without it there is always a new
// commit (the host's S, whose parent must be HEAD).
func Snapshot(dir, msg string, reuseHead bool, except ...string) (string, error) {
	tree, err := SnapshotTree(dir, except...)
	if err != nil {
		return "", err
	}
	head, herr := Run(dir, nil, nil, "rev-parse", "--verify", "-q", "HEAD")
	if herr == nil && reuseHead {
		if ht, _ := Run(dir, nil, nil, "rev-parse", "HEAD^{tree}"); ht == tree {
			return head, nil
		}
	}
	args := []string{"-c", "user.name=cocoonbox", "-c", "user.email=offload@cocoonbox.invalid", "commit-tree", tree, "-m", msg}
	if herr == nil {
		args = append(args, "-p", head)
	}
	return Run(dir, nil, nil, args...)
}

// GitPath is `git rev-parse --git-path NAME` made absolute: where a linked
// worktree keeps its own HEAD, index and index.lock.
func GitPath(dir, name string) (string, error) {
	p, err := Run(dir, nil, nil, "rev-parse", "--path-format=absolute", "--git-path", name)
	if err != nil {
		return "", err
	}
	return filepath.Clean(p), nil
}
