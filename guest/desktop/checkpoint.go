package desktop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// xfce4-session's D-Bus names (xfsm-manager-dbus.xml).
const (
	SessionManagerName  = "org.xfce.SessionManager"
	SessionManagerPath  = dbus.ObjectPath("/org/xfce/SessionManager")
	SessionManagerIface = "org.xfce.Session.Manager"
)

// The D-Bus error names of xfce4-session's XFSM_ERROR_BAD_STATE ("Session
// manager must be in idle state when requesting a checkpoint"): the GDBus
// versions (4.16 on, Debian 12's 4.18) register it as ".Error.Failed"
// (xfsm-error.c), the dbus-glib ones named it after the enum.
const (
	errBadState    = "org.xfce.SessionManager.Error.Failed"
	errBadStateOld = "org.xfce.SessionManager.Error.BadState"
)

// StateIdle is xfce4-session's XFSM_MANAGER_IDLE, the state GetState
// answers when no checkpoint or shutdown is under way.
const StateIdle = 1

var (
	// ErrNoSessionManager: nobody owns org.xfce.SessionManager on the bus,
	// so no xfce4-session runs there.
	ErrNoSessionManager = errors.New("xfce4-session is not running: nobody owns " + SessionManagerName + " on the session bus")
	// ErrBusy: xfce4-session refused the checkpoint because it is not idle
	// (starting up, saving or logging out); a later try can work.
	ErrBusy = errors.New("xfce4-session is busy (not idle)")
	// ErrNoSessionFile: the checkpoint was taken but the session file did
	// not change in time.
	ErrNoSessionFile = errors.New("the session file did not appear in time")
)

// Checkpoint asks xfce4-session on conn to save the current session
// (org.xfce.Session.Manager.Checkpoint with the name "", the session in
// use), then waits until sessionFile has been rewritten and the manager is
// idle again, polling every pollEvery, at most until ctx ends. It returns
// the saved session as read back from the file. The file is xfce4-session's
// own, written by it with a rename, so a failed or timed-out save leaves
// the previous one in place.
//
// A manager that is not idle (still starting right after a desktop
// restart, when a quiesce may call this; or saving, or logging out)
// refuses a checkpoint with BadState: Checkpoint asks again every
// pollEvery until it is taken, and returns ErrBusy only when ctx ends
// first (Contract: Desktop session save).
func Checkpoint(ctx context.Context, conn *dbus.Conn, sessionFile string, pollEvery time.Duration) (Session, error) {
	var owned bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, SessionManagerName).Store(&owned); err != nil {
		return Session{}, fmt.Errorf("ask the session bus whether xfce4-session runs: %w", err)
	}
	if !owned {
		return Session{}, ErrNoSessionManager
	}
	before := stamp(sessionFile)
	obj := conn.Object(SessionManagerName, SessionManagerPath)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		call := obj.CallWithContext(ctx, SessionManagerIface+".Checkpoint", 0, "")
		if call.Err == nil {
			break
		}
		var de dbus.Error
		busy := errors.As(call.Err, &de) && (de.Name == errBadState || de.Name == errBadStateOld)
		switch {
		case busy:
			select {
			case <-ctx.Done():
				return Session{}, fmt.Errorf("%w: it did not become idle before the wait ended: %v", ErrBusy, call.Err)
			case <-tick.C:
				continue
			}
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return Session{}, fmt.Errorf("%w: %s.Checkpoint did not answer: %v", ErrNoSessionFile, SessionManagerIface, call.Err)
		}
		return Session{}, fmt.Errorf("%s.Checkpoint: %w", SessionManagerIface, call.Err)
	}
	for {
		if now := stamp(sessionFile); now.exists && now != before {
			var state uint32
			err := obj.CallWithContext(ctx, SessionManagerIface+".GetState", 0).Store(&state)
			if err == nil && state == StateIdle {
				data, err := os.ReadFile(sessionFile)
				if err != nil {
					return Session{}, err
				}
				return ParseSession(data)
			}
		}
		select {
		case <-ctx.Done():
			return Session{}, fmt.Errorf("%w: %s unchanged or xfce4-session not idle when the wait ended (%v)", ErrNoSessionFile, sessionFile, ctx.Err())
		case <-tick.C:
		}
	}
}

// fileStamp tells one version of a file from another: xfce4-session
// replaces the file, so the inode changes, and the time and size too.
type fileStamp struct {
	exists bool
	ino    uint64
	mtime  time.Time
	size   int64
}

func stamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return fileStamp{}
	}
	s := fileStamp{exists: true, mtime: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	return s
}
