package gitcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := Run(dir, nil, nil, append([]string{"-c", "user.name=t", "-c", "user.email=t@invalid"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A copy that rsync filled before its bundle came has refs naming objects
// it lacks: Refs leaves them out, so the host bundles from what the copy
// really has (Contract: Offload, the bundle --not begin's refs).
func TestRefsLeaveOutRefsWithoutTheirObjects(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644)
	git(t, dir, "add", "a")
	git(t, dir, "commit", "-q", "-m", "one")
	head := git(t, dir, "rev-parse", "HEAD")
	missing := strings.Repeat("ab", 20)
	os.WriteFile(filepath.Join(dir, ".git/refs/heads/gone"), []byte(missing+"\n"), 0o644)
	refs := Refs(dir)
	if refs["refs/heads/gone"] != "" {
		t.Errorf("a ref without its object is listed: %v", refs)
	}
	if len(refs) != 1 || refs[firstRef(refs)] != head {
		t.Errorf("refs %v, want the one branch at %s", refs, head)
	}
}

func firstRef(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

// S is always a new commit whose parent is HEAD and whose tree is the work
// tree with untracked files; S′ is HEAD itself when nothing changed.
func TestSnapshot(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644)
	git(t, dir, "add", "a")
	git(t, dir, "commit", "-q", "-m", "one")
	head := git(t, dir, "rev-parse", "HEAD")
	if s, _ := Snapshot(dir, "S′", true); s != head {
		t.Errorf("an unchanged tree's S′ is %s, want HEAD %s", s, head)
	}
	s, err := Snapshot(dir, "S", false)
	if err != nil || s == head || git(t, dir, "rev-parse", s+"^") != head {
		t.Errorf("S %s (%v), want a new commit on HEAD", s, err)
	}
	os.WriteFile(filepath.Join(dir, "new"), []byte("untracked\n"), 0o644)
	s, _ = Snapshot(dir, "S", false)
	if git(t, dir, "cat-file", "-p", s+":new") != "untracked" || git(t, dir, "status", "--porcelain") != "?? new" {
		t.Error("the snapshot misses the untracked file, or changed the index")
	}
}

// STYLE: raw bytes for -z output. A path that starts with a space is
// listed as it is, first in the list as anywhere (Run's trim made the
// ignored " n.log" "n.log", and the host's "you changed this" check missed
// " n.txt").
func TestNULSeparatedOutputKeepsALeadingSpace(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n"), 0o644)
	os.WriteFile(filepath.Join(dir, " n.log"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "tail\n"), []byte("x\n"), 0o644)
	ign, err := Ignored(dir)
	if err != nil || len(ign) != 1 || ign[0] != " n.log" {
		t.Errorf("Ignored = %q, %v; want [\" n.log\"]", ign, err)
	}
	paths, err := Paths(dir, nil, nil, "ls-files", "-z", "-o", "--exclude-standard")
	if err != nil || strings.Join(paths, "|") != ".gitignore|tail\n" {
		t.Errorf("Paths = %q, %v", paths, err)
	}
}
