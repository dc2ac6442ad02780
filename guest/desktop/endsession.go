package desktop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// PAMService is the PAM service (/etc/pam.d/cocoonbox-session) through
// which cocoonbox-session.service opens the desktop's logind session;
// logind records it as the session's Service.
const PAMService = "cocoonbox-session"

// Ended is one logind session EndSessions ended.
type Ended struct {
	// ID is logind's session id ("37"); Scope its unit (session-37.scope).
	ID, Scope string
	// Killed says the session's processes outlived the grace after
	// logind's SIGTERM and were sent SIGKILL (cgroup.kill).
	Killed bool
}

// EndSessions ends every logind session opened through PAMService, and
// returns only when no process of any is left: each is terminated through
// logind (SIGTERM to its scope), and what still runs after grace is killed
// through the scope's cgroup.kill, whatever state it is in (stopped,
// ignoring SIGTERM, busy saving). It is the desktop unit's ExecStopPost=
// (as root): logind stops a closed session's scope on its own, but
// asynchronously, after the unit's stop is over, so without it the next
// start's xfwm4 found the old one still managing the screen and exited,
// and the restarted desktop had no window manager (issue 25).
// The error names the sessions whose processes are still there when ctx
// ends, or why logind could not be asked.
func EndSessions(ctx context.Context, grace time.Duration) ([]Ended, error) {
	cgroupRoot, err := UnifiedRoot()
	if err != nil {
		return nil, err
	}
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("connecting to the system bus: %w", err)
	}
	defer conn.Close()
	login := conn.Object("org.freedesktop.login1", "/org/freedesktop/login1")
	var sessions []struct {
		ID   string
		UID  uint32
		User string
		Seat string
		Path dbus.ObjectPath
	}
	if err := login.CallWithContext(ctx, "org.freedesktop.login1.Manager.ListSessions", 0).Store(&sessions); err != nil {
		return nil, fmt.Errorf("asking logind for its sessions: %w", err)
	}
	var ended []Ended
	var cgroups []string
	for _, s := range sessions {
		obj := conn.Object("org.freedesktop.login1", s.Path)
		var service, scope string
		if obj.StoreProperty("org.freedesktop.login1.Session.Service", &service) != nil || service != PAMService {
			continue // gone meanwhile, or not the desktop's
		}
		if err := obj.StoreProperty("org.freedesktop.login1.Session.Scope", &scope); err != nil || !validScope(scope) {
			return nil, fmt.Errorf("logind session %s of %s: no scope unit (%q, %v)", s.ID, s.User, scope, err)
		}
		// An error here is a session logind removed meanwhile; the wait
		// below tells.
		_ = login.CallWithContext(ctx, "org.freedesktop.login1.Manager.TerminateSession", 0, s.ID).Err
		ended = append(ended, Ended{ID: s.ID, Scope: scope})
		cgroups = append(cgroups, filepath.Join(cgroupRoot, "user.slice", fmt.Sprintf("user-%d.slice", s.UID), scope))
	}
	killed, err := Drain(ctx, cgroups, grace)
	for i := range ended {
		ended[i].Killed = killed[i]
	}
	return ended, err
}

// validScope: a logind session's scope unit, session-ID.scope, and no
// path (it becomes one below the user's slice).
func validScope(s string) bool {
	id, ok := strings.CutPrefix(s, "session-")
	id, ok2 := strings.CutSuffix(id, ".scope")
	return ok && ok2 && id != "" && !strings.ContainsAny(id, "/.")
}

// UnifiedRoot is where the unified (v2) cgroup hierarchy is mounted:
// /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified in systemd's
// hybrid mode (a box under systemd-nspawn on a host that is hybrid itself,
// as the build hosts are). Only v2 has cgroup.events and cgroup.kill.
func UnifiedRoot() (string, error) {
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir, nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")
}

// Drain waits until no process is left in any of the cgroup directories
// (cgroup v2; a directory that is gone is empty), polling every 20 ms.
// Those still populated after grace are killed once through cgroup.kill
// (SIGKILL to every process in them, stopped ones too); killed[i] says
// whether cgroups[i] was. The error names the cgroups still populated
// when ctx ends.
func Drain(ctx context.Context, cgroups []string, grace time.Duration) (killed []bool, err error) {
	killed = make([]bool, len(cgroups))
	deadline := time.Now().Add(grace)
	for {
		var left []string
		for i, dir := range cgroups {
			populated, err := Populated(dir)
			if err != nil {
				return killed, err
			}
			if !populated {
				continue
			}
			if !killed[i] && !time.Now().Before(deadline) {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return killed, fmt.Errorf("killing what is left in %s: %w", dir, err)
				}
				killed[i] = true
			}
			left = append(left, dir)
		}
		if len(left) == 0 {
			return killed, nil
		}
		select {
		case <-ctx.Done():
			return killed, fmt.Errorf("processes still run in %s: %w", strings.Join(left, ", "), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Populated says whether a process is in the cgroup directory dir or
// below it (its cgroup.events' "populated 1"); a directory that is gone
// holds none.
func Populated(dir string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", filepath.Join(dir, "cgroup.events"), err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return v == "1", nil
		}
	}
	return false, fmt.Errorf("%s has no populated line: %q", filepath.Join(dir, "cgroup.events"), data)
}
