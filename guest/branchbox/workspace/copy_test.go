package workspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// TestCopyTreeIntoTheWorkspaceVolume: the files, directories and symlinks
// arrive with their permission bits and the consumer's owner; a symlink is
// copied as itself (its target outside is never read), the worktree's .git
// file and a FIFO stay out.
func TestCopyTreeIntoTheWorkspaceVolume(t *testing.T) {
	testenv.RequireRoot(t, "the copy is given to the consumer UID")
	src, dst := t.TempDir(), t.TempDir()
	for _, d := range []string{"src", "src/deep"} {
		if err := os.Mkdir(filepath.Join(src, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{"README": 0o644, "src/run.sh": 0o755, "src/deep/secret": 0o600}
	for name, mode := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte("body of "+name), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(src, name), mode|os.ModeSetuid)
	}
	os.WriteFile(filepath.Join(src, ".git"), []byte("gitdir: /srv/branchbox/repos/app/.git/worktrees/x\n"), 0o644)
	os.Symlink("/etc/shadow", filepath.Join(src, "shadow"))
	syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644)
	if err := CopyTree(src, dst, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	for name, mode := range files {
		p := filepath.Join(dst, name)
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if body, _ := os.ReadFile(p); string(body) != "body of "+name || st.Mode() != mode || st.Sys().(*syscall.Stat_t).Uid != 1000 {
			t.Errorf("%s: %q mode %v uid %d", name, body, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
		}
	}
	if st, _ := os.Stat(filepath.Join(dst, "src", "deep")); st == nil || st.Mode().Perm() != 0o750 || st.Sys().(*syscall.Stat_t).Gid != 1000 {
		t.Errorf("src/deep: %v", st)
	}
	if target, err := os.Readlink(filepath.Join(dst, "shadow")); err != nil || target != "/etc/shadow" {
		t.Errorf("symlink: %q %v", target, err)
	}
	for _, gone := range []string{".git", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dst, gone)); !os.IsNotExist(err) {
			t.Errorf("%s was copied", gone)
		}
	}
}
