package packages

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain doubles as the lock holder: with COCOONBOX_TEST_HOLD_LOCK set,
// the test binary takes an fcntl write lock on that file (as apt does),
// says "locked" and sleeps until killed.
func TestMain(m *testing.M) {
	if path := os.Getenv("COCOONBOX_TEST_HOLD_LOCK"); path != "" {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			panic(err)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLKW, &lk); err != nil {
			panic(err)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// holdLock starts a process that holds an fcntl lock on path until the
// test ends, and returns its pid.
func holdLock(t *testing.T, path string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "COCOONBOX_TEST_HOLD_LOCK="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q %v", line, err)
	}
	return cmd.Process.Pid
}

func TestLockHolderSeesAnotherProcesssFcntlLock(t *testing.T) {
	dir := t.TempDir()
	free, held := filepath.Join(dir, "free"), filepath.Join(dir, "held")
	os.WriteFile(free, nil, 0o640)
	files := []string{filepath.Join(dir, "missing"), free, held}
	if pid, _, err := LockHolder(files[:2]); err != nil || pid != 0 {
		t.Fatalf("free locks: pid %d, %v", pid, err)
	}
	holder := holdLock(t, held)
	pid, path, err := LockHolder(files)
	if err != nil || pid != holder || path != held {
		t.Fatalf("LockHolder = %d %s %v, want %d %s", pid, path, err, holder, held)
	}
	err = WaitForLocks(context.Background(), files, 300*time.Millisecond, 50*time.Millisecond)
	if !errors.Is(err, ErrLockBusy) {
		t.Fatalf("WaitForLocks = %v, want ErrLockBusy", err)
	}
	// (No wall-clock bound on how long it waited: tests never assert time.)
}

func TestWaitForLocksReturnsOnceFreed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "COCOONBOX_TEST_HOLD_LOCK="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q %v", line, err)
	}
	// The holder ends a while after the wait began; the wait must not end
	// before it (issue 18, item 9: a wait that returned at once passed).
	var released atomic.Bool
	release := time.AfterFunc(300*time.Millisecond, func() { released.Store(true); cmd.Process.Kill(); cmd.Wait() })
	defer release.Stop()
	if err := WaitForLocks(context.Background(), []string{path}, 20*time.Second, 50*time.Millisecond); err != nil {
		t.Fatalf("WaitForLocks after the holder exited: %v", err)
	}
	if !released.Load() {
		t.Fatal("WaitForLocks returned while the lock was still held")
	}
}
