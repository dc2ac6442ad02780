package repocorpus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every shape is made, is a repository with a remote-tracking origin/HEAD
// where it is a clone, and has the mark that makes it the shape.
func TestShapesAreMade(t *testing.T) {
	marks := map[string]func(t *testing.T, top string){
		"clone": func(t *testing.T, top string) {
			if got := strings.TrimSpace(Git(t, top, "symbolic-ref", "refs/remotes/origin/HEAD")); got != "refs/remotes/origin/main" {
				t.Errorf("origin/HEAD is %q", got)
			}
			if n := len(strings.Fields(Git(t, top, "branch", "-r"))); n < 4 {
				t.Errorf("%d remote branches", n)
			}
		},
		"clone-fetched": func(t *testing.T, top string) {
			if Git(t, top, "rev-parse", "origin/main") == Git(t, top, "rev-parse", "HEAD~1") {
				t.Error("the fetch did not move origin/main")
			}
		},
		"default-trunk": func(t *testing.T, top string) {
			if got := strings.TrimSpace(Git(t, top, "symbolic-ref", "--short", "HEAD")); got != "trunk" {
				t.Errorf("HEAD is %q", got)
			}
		},
		"shallow":         func(t *testing.T, top string) { exists(t, top, ".git/shallow") },
		"linked-worktree": func(t *testing.T, top string) { isFile(t, top, ".git") },
		"submodule":       func(t *testing.T, top string) { exists(t, top, "lib/lib.txt"); isFile(t, top, "lib/.git") },
		"lfs-pointers":    func(t *testing.T, top string) { exists(t, top, ".git/lfs") },
		"lfs-content":     func(t *testing.T, top string) { exists(t, top, ".git/lfs") },
		"sparse": func(t *testing.T, top string) {
			if !strings.Contains(Git(t, top, "ls-files", "-t"), "S docs/guide.md") {
				t.Error("docs/guide.md has no skip-worktree bit")
			}
		},
		"partially-staged": func(t *testing.T, top string) {
			if !strings.HasPrefix(Git(t, top, "status", "--porcelain", "src/main.go"), "MM ") {
				t.Error("src/main.go is not staged and changed again")
			}
		},
		"odd-paths": func(t *testing.T, top string) {
			exists(t, top, LeadingSpace)
			exists(t, top, Newline)
			exists(t, top, NonUTF8)
		},
		"autocrlf":    func(t *testing.T, top string) {},
		"tree-10k":    func(t *testing.T, top string) { exists(t, top, "d99/f99.txt") },
		"status-200k": func(t *testing.T, top string) {},
	}
	for _, s := range Shapes() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel() // git runs in processes: both cores
			top := s.Make(t)
			if s.Outcome != Back && s.Outcome != Refused {
				t.Errorf("outcome %q", s.Outcome)
			}
			if got := strings.TrimSpace(Git(t, top, "rev-parse", "--show-toplevel")); got != top {
				t.Errorf("the top is %q, want %q", got, top)
			}
			mark, ok := marks[s.Name]
			if !ok {
				t.Fatalf("no mark for %s", s.Name)
			}
			mark(t, top)
		})
	}
}

func exists(t *testing.T, top, name string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(top, name)); err != nil {
		t.Error(err)
	}
}

func isFile(t *testing.T, top, name string) {
	t.Helper()
	if fi, err := os.Lstat(filepath.Join(top, name)); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s is not a file: %v", name, err)
	}
}
