package database

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is wrapped by Lock's error when another live process holds the state directory.
var ErrLocked = errors.New("state directory in use")

// Lock takes the state directory's lock (an flock on DIR/api.lock holding the
// owner's pid), made so that one api at a time serves a state directory and
// its embedded cluster. The lock ends with the process, so a crash leaves
// nothing to clean. Its error wraps ErrLocked and names the holder's pid.
func Lock(stateDir string) (unlock func(), err error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(stateDir, "api.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another cocoonbox-api (pid %s) is serving %s; stop it first, or give this one another --state-dir", ErrLocked, strings.TrimSpace(string(pid)), stateDir)
		}
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
