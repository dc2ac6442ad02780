package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

func openDir(t *testing.T, dir string) int {
	t.Helper()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(dfd) })
	return dfd
}

// entries are the names in dir: a write leaves only its file.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// A write replaces the old file whole, with the mode asked for whatever the
// umask, and leaves no temporary file.
func TestWriteFileReplacesWithTheModeAndNoTemporaryFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "record")
	if err := os.WriteFile(path, []byte("old and longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	st, _ := os.Stat(path)
	if err != nil || string(data) != "new\n" || st.Mode().Perm() != 0o644 {
		t.Fatalf("got %q mode %v (%v), want \"new\\n\" 0644", data, st.Mode(), err)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("the directory holds %v, want the record alone", got)
	}
}

// Run as root, Chown gives the file to the user on the descriptor.
func TestWriteAtChownsOnTheDescriptor(t *testing.T) {
	testenv.RequireRoot(t, "chown a file to another user")
	dir := t.TempDir()
	if err := WriteAt(openDir(t, dir), "list", File{Data: []byte("x\n"), Mode: 0o644, Chown: true, UID: 1000, GID: 1001}); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "list"), &st); err != nil || st.Uid != 1000 || st.Gid != 1001 {
		t.Fatalf("owner %d:%d (%v), want 1000:1001", st.Uid, st.Gid, err)
	}
}

// NoReplace refuses an existing name with EEXIST, leaving it and no
// temporary file; a rename that fails (a directory at the name) removes
// the temporary file too.
func TestWriteAtNoReplaceAndAFailedRenameLeaveNothing(t *testing.T) {
	dir := t.TempDir()
	dfd := openDir(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "answer"), []byte("first"), 0o400); err != nil {
		t.Fatal(err)
	}
	err := WriteAt(dfd, "answer", File{Data: []byte("second"), Mode: 0o400, NoReplace: true})
	if !errors.Is(err, unix.EEXIST) {
		t.Fatalf("NoReplace over an existing file: %v, want EEXIST", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "answer")); string(data) != "first" {
		t.Fatalf("the existing file holds %q", data)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAt(dfd, "sub", File{Data: []byte("y"), Mode: 0o644}); err == nil {
		t.Fatal("a file renamed over a non-empty directory")
	}
	if got := entries(t, dir); len(got) != 2 {
		t.Fatalf("the directory holds %v, want answer and sub alone", got)
	}
}

// The temporary file's name may be the caller's (identity cleans up after
// killed writers by its pattern); one already there is refused, not
// truncated.
func TestWriteAtNamedTemporaryFileIsExclusive(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".f.tmp"), []byte("another writer's"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteAt(openDir(t, dir), "f", File{Data: []byte("mine"), Mode: 0o600, Temp: ".f.tmp"})
	if !errors.Is(err, unix.EEXIST) {
		t.Fatalf("a temporary file already there: %v, want EEXIST", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ".f.tmp")); string(data) != "another writer's" {
		t.Fatalf("the other writer's file holds %q", data)
	}
}

// CreateAt makes a new file with its mode whatever the umask, and refuses
// a name already there, leaving it.
func TestCreateAtIsExclusiveWithItsMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	dfd := openDir(t, dir)
	if err := CreateAt(dfd, "keys", File{Data: []byte("k\n"), Mode: 0o444}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "keys"))
	if err != nil || st.Mode().Perm() != 0o444 {
		t.Fatalf("mode %v (%v), want 0444", st.Mode(), err)
	}
	if err := CreateAt(dfd, "keys", File{Data: []byte("other\n"), Mode: 0o444}); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("a second create: %v, want EEXIST", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "keys")); string(data) != "k\n" {
		t.Fatalf("the first file holds %q", data)
	}
}
