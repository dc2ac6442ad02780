package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// errBusy is a run another branchbox is working on: exit 75, try again.
var errBusy = errors.New("another branchbox holds the run's lock")

// lockRun takes <root>/locks/<run>.lock (flock, not waiting), so one
// materialize or teardown of a run at a time; the kernel drops it when the
// process ends, so a crash leaves no stale lock. exec takes it too, so a
// teardown does not pull a value file from under a starting provider; it
// is closed on exec. The lock files stay (empty, in /run).
func (e *env) lockRun() (func(), error) {
	dir := filepath.Join(e.o.root, "locks")
	if err := unix.Mkdir(dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	dfd, err := rundir.OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	name := e.o.runID + ".lock"
	fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", dir, name, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("run %s: %w (%s/%s)", e.o.runID, errBusy, dir, name)
		}
		return nil, fmt.Errorf("lock %s/%s: %w", dir, name, err)
	}
	return func() { unix.Close(fd) }, nil
}
