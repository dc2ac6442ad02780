package packages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// LockFiles are the locks apt and dpkg take (fcntl write locks on the
// whole file): the frontend lock apt holds for a whole run, dpkg's own
// database lock, and the lists lock of apt-get update.
var LockFiles = []string{
	"/var/lib/dpkg/lock-frontend",
	"/var/lib/dpkg/lock",
	"/var/lib/apt/lists/lock",
}

// ErrLockBusy reports a dpkg or apt lock that stayed held past the lock
// timeout; the caller exits 75 (try again later).
var ErrLockBusy = errors.New("the dpkg lock stayed held")

// LockHolder returns the pid of a process that holds one of files (an
// fcntl lock apt and dpkg would conflict with) and that file, or 0 when
// none is held. It only tests (F_GETLK) and takes no lock, so apt run next
// is not in its way. A lock file that does not exist is not held.
func LockHolder(files []string) (int, string, error) {
	for _, path := range files {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, path, fmt.Errorf("open lock %s: %w", path, err)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
		err = unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk)
		f.Close()
		if err != nil {
			return 0, path, fmt.Errorf("test lock %s: %w", path, err)
		}
		if lk.Type != unix.F_UNLCK {
			return int(lk.Pid), path, nil
		}
	}
	return 0, "", nil
}

// WaitForLocks polls files every poll until none is held, and returns
// ErrLockBusy (wrapped with the holder) when one still is after timeout.
func WaitForLocks(ctx context.Context, files []string, timeout, poll time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pid, path, err := LockHolder(files)
		if err != nil || pid == 0 {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w for %v: %s is held by pid %d", ErrLockBusy, timeout, path, pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(poll, time.Until(deadline)+time.Millisecond)):
		}
	}
}
