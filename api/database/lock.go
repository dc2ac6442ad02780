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

// Roles a lock holder writes beside its pid: an api serving the state
// directory, or an admin command that started the cluster for itself and
// stops it when it ends.
const (
	RoleServe = "serve"
	RoleAdmin = "admin"
)

// LockedError is Lock's error for a state directory another live process
// holds: its pid and role as the lock file says them. It wraps ErrLocked.
type LockedError struct {
	Dir, PID, Role string
}

// Error names the holder: a serving api (stop it, or use another state
// directory) or an admin command (wait for it).
func (e *LockedError) Error() string {
	if e.Role == RoleAdmin {
		return fmt.Sprintf("%v: an admin command of cocoonbox-api (pid %s) is using %s", ErrLocked, e.PID, e.Dir)
	}
	return fmt.Sprintf("%v: another cocoonbox-api (pid %s) is serving %s; stop it first, or give this one another --state-dir", ErrLocked, e.PID, e.Dir)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock takes the state directory's lock (an flock on DIR/api.lock holding the
// owner's pid and role), made so that one api at a time serves a state
// directory and its embedded cluster. The lock ends with the process, so a
// crash leaves nothing to clean. Its error for a held lock is a
// *LockedError.
func Lock(stateDir, role string) (unlock func(), err error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(stateDir, "api.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		held, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			// A lock file of before the roles holds the pid alone: a serving api.
			pid, role, _ := strings.Cut(strings.TrimSpace(string(held)), " ")
			return nil, &LockedError{Dir: stateDir, PID: pid, Role: role}
		}
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+role+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
