package pathwatch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// seer is a Run whose fn records what the file holds and the directory's
// mode, as a helper would read them.
type seer struct {
	mu    sync.Mutex
	file  string
	mode  os.FileMode
	calls int
}

func start(t *testing.T, paths []string, file, dir string) *seer {
	t.Helper()
	s := &seer{}
	fn := func() {
		data, _ := os.ReadFile(file)
		var mode os.FileMode
		if st, err := os.Stat(dir); err == nil {
			mode = st.Mode().Perm()
		}
		s.mu.Lock()
		s.file, s.mode = string(data), mode
		s.calls++
		s.mu.Unlock()
	}
	stopR, stopW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- Run(paths, fn, func() { close(ready) }, int(stopR.Fd())) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run never said it was ready")
	}
	t.Cleanup(func() {
		stopW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after stop, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after stop")
		}
		stopR.Close()
	})
	return s
}

func (s *seer) waitFor(t *testing.T, what string, ok func(file string, mode os.FileMode) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		file, mode := s.file, s.mode
		s.mu.Unlock()
		if ok(file, mode) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: fn last saw %q, mode %v", what, file, mode)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func renameIn(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// The bug the package exists for: the last change of a burst must be seen,
// whatever its timing. Then each kind of change the helpers rely on.
func TestRunSeesEveryKindOfChangeAndTheLastOfABurst(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "identity.d")
	file := filepath.Join(dir, "identity")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := start(t, []string{dir, file}, file, dir)
	is := func(want string) func(string, os.FileMode) bool {
		return func(f string, _ os.FileMode) bool { return f == want }
	}

	for i := 1; i <= 200; i++ {
		renameIn(t, file, fmt.Sprintf("gen %d", i))
	}
	s.waitFor(t, "the last of 200 renames", is("gen 200"))

	if err := os.WriteFile(file, []byte("in place"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "a write in place", is("in place"))

	if err := os.Chmod(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the directory's mode", func(_ string, m os.FileMode) bool { return m == 0o775 })

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the directory removed", is(""))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	renameIn(t, file, "after a new directory")
	s.waitFor(t, "a file in a directory made anew", is("after a new directory"))

	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the directory renamed away", is(""))
	renameIn(t, filepath.Join(dir+".old", "identity"), "in the old directory")
	other := filepath.Join(root, "staged")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	renameIn(t, filepath.Join(other, "identity"), "staged, then renamed into place")
	if err := os.Rename(other, dir); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "a directory renamed into place", is("staged, then renamed into place"))
	renameIn(t, file, "and watched there")
	s.waitFor(t, "a change in the directory renamed into place", is("and watched there"))

	// Nothing that concerns no path makes a call.
	s.mu.Lock()
	before := s.calls
	s.mu.Unlock()
	for i := 0; i < 20; i++ {
		renameIn(t, filepath.Join(root, "unrelated"), "x")
		renameIn(t, filepath.Join(dir+".old", "identity"), "x")
	}
	// A change of the path itself, last: once fn has seen it, every event
	// before it was handled too (inotify keeps their order), so no sleep
	// is needed to know the others made no call.
	renameIn(t, file, "the sentinel")
	s.waitFor(t, "the sentinel change", is("the sentinel"))
	s.mu.Lock()
	after := s.calls
	s.mu.Unlock()
	if after != before+1 {
		t.Errorf("%d calls for 40 changes of other paths and one of the path, want 1", after-before)
	}
}

func TestRunRefusesWhatItCannotWatch(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{"relative/file"}, "absolute and clean"},
		{[]string{root + "/a/../b"}, "absolute and clean"},
		// A file whose parent is missing and not itself watched for.
		{[]string{filepath.Join(root, "missing", "file")}, "no such file"},
	} {
		err := Run(c.paths, func() {}, func() {}, -1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%q) = %v, want an error with %q", c.paths, err, c.want)
		}
	}
}
