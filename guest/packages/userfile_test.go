package packages

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func testHome(t *testing.T) Home {
	t.Helper()
	dir := t.TempDir()
	return Home{Dir: dir, UID: os.Getuid(), GID: os.Getgid()}
}

func readList(t *testing.T, h Home) string {
	t.Helper()
	f, err := h.OpenList()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return string(b)
}

func TestWriteListCreatesDirectoriesAndRewrites(t *testing.T) {
	h := testHome(t)
	changed, replaced, err := h.WriteList([]string{"cowsay", "hello"})
	if err != nil || !changed || replaced != "" {
		t.Fatalf("WriteList = %v %q %v", changed, replaced, err)
	}
	if got := readList(t, h); got != "cowsay\nhello\n" {
		t.Errorf("list = %q", got)
	}
	st, _ := os.Stat(filepath.Join(h.Dir, ListDir))
	if st.Mode().Perm() != 0o700 {
		t.Errorf("%s mode %v, want 0700", ListDir, st.Mode())
	}
	st, _ = os.Stat(h.Path())
	if st.Mode().Perm() != 0o644 {
		t.Errorf("list mode %v, want 0644", st.Mode())
	}
	// The same lines again: untouched.
	if changed, _, err := h.WriteList([]string{"cowsay", "hello"}); err != nil || changed {
		t.Errorf("rewriting the same list: changed %v, %v", changed, err)
	}
	// A removed package drops out.
	if _, _, err := h.WriteList([]string{"hello"}); err != nil {
		t.Fatal(err)
	}
	if got := readList(t, h); got != "hello\n" {
		t.Errorf("list = %q", got)
	}
	if _, _, err := h.WriteList(nil); err != nil {
		t.Fatal(err)
	}
	if got := readList(t, h); got != "" {
		t.Errorf("empty list = %q", got)
	}
	left, _ := filepath.Glob(filepath.Join(h.Dir, ListDir, ".*tmp*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteListReplacesASymlinkWithoutFollowingIt(t *testing.T) {
	h := testHome(t)
	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("secret\n"), 0o640)
	os.MkdirAll(filepath.Join(h.Dir, ListDir), 0o700)
	os.Symlink(victim, h.Path())
	if _, err := h.OpenList(); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("OpenList through a symlink: %v, want ErrUnsafePath", err)
	}
	_, replaced, err := h.WriteList([]string{"hello"})
	if err != nil || replaced != "a symlink" {
		t.Fatalf("WriteList = %q, %v", replaced, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "secret\n" {
		t.Errorf("the symlink's target changed: %q", b)
	}
	if fi, _ := os.Lstat(h.Path()); !fi.Mode().IsRegular() {
		t.Errorf("the list is %v, not a regular file", fi.Mode())
	}
}

func TestSymlinkedDirectoriesAreRefused(t *testing.T) {
	for _, link := range []string{".config", ListDir} {
		t.Run(strings.ReplaceAll(link, "/", "_"), func(t *testing.T) {
			h := testHome(t)
			elsewhere := t.TempDir()
			os.MkdirAll(filepath.Join(elsewhere, "cocoonbox"), 0o700)
			os.MkdirAll(filepath.Dir(filepath.Join(h.Dir, link)), 0o700)
			target := elsewhere
			if link == ListDir {
				target = filepath.Join(elsewhere, "cocoonbox")
			}
			if err := os.Symlink(target, filepath.Join(h.Dir, link)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.WriteList([]string{"hello"}); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("WriteList through symlinked %s: %v, want ErrUnsafePath", link, err)
			}
			if _, err := h.OpenList(); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("OpenList through symlinked %s: %v, want ErrUnsafePath", link, err)
			}
			if m, _ := filepath.Glob(filepath.Join(elsewhere, "*", "*")); len(m) > 0 {
				t.Errorf("wrote through the link: %v", m)
			}
		})
	}
}

func TestHomeOfAnotherUserIsRefused(t *testing.T) {
	h := testHome(t)
	h.UID++
	if _, _, err := h.WriteList([]string{"hello"}); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("WriteList into a home of another uid: %v, want ErrUnsafePath", err)
	}
}

func TestOpenListRefusesFifoAndDirectory(t *testing.T) {
	h := testHome(t)
	os.MkdirAll(filepath.Join(h.Dir, ListDir), 0o700)
	if err := syscall.Mkfifo(h.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.OpenList(); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("OpenList of a FIFO: %v, want ErrUnsafePath (and no hang)", err)
	}
	if _, replaced, err := h.WriteList([]string{"hello"}); err != nil || replaced != "a FIFO" {
		t.Errorf("WriteList over a FIFO: %q %v", replaced, err)
	}
	os.Remove(h.Path())
	os.Mkdir(h.Path(), 0o700)
	if _, _, err := h.WriteList([]string{"hello"}); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("WriteList over a directory: %v", err)
	}
}

func TestOpenListMissingIsNotExist(t *testing.T) {
	h := testHome(t)
	if _, err := h.OpenList(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenList with no list: %v", err)
	}
}
