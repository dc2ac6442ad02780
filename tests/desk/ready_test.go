//go:build booted

package desk

import (
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// cocoonbox-xorg.service's promise: active only once :0 takes clients
// (docs/desk.md). Issue 24, Deliver 9 made the readiness Xorg's own
// report (Type=notify: Debian's Xorg sends READY=1 when it is about to
// serve its first client) instead of a poll with xdpyinfo every 100 ms on
// the boot's path.

// xorgState is the unit's ActiveState, SubState and Result, in that order.
func xorgState(b *box.Box) string {
	out, _ := b.Run("systemctl", "show", "-p", "ActiveState,SubState,Result", "cocoonbox-xorg.service")
	props := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			props[k] = v
		}
	}
	return props["ActiveState"] + " " + props["SubState"] + " " + props["Result"]
}

// Contract: Desktop user. With no xdpyinfo in the box, Xorg's start still
// ends, and a client reaches :0 at the first try once it has: nothing
// runs a client to find out whether the server is up. The old unit's
// ExecStartPost (xdpyinfo every 100 ms, 30 s at most) failed the start
// here. The server is the unit's main process, the one whose report counts.
func TestXorgIsActiveOnItsOwnReportWithNoClientAsking(t *testing.T) {
	b := bootDesk(t)
	restartXorgWithout(t, b, "/usr/bin/xdpyinfo")
	// The restart has returned: the server takes this client now, not
	// eventually.
	mustUser(t, b, "xwininfo -root >/dev/null")
	pid := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "cocoonbox-xorg.service"))
	if comm := strings.TrimSpace(b.Must(t, "cat", "/proc/"+pid+"/comm")); comm != "Xorg" {
		t.Errorf("cocoonbox-xorg.service's main process is %q, not Xorg", comm)
	}
	if got := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "ExecStartPost", "cocoonbox-xorg.service")); got != "" {
		t.Errorf("cocoonbox-xorg.service still has an ExecStartPost= on its start: %s", got)
	}
	waitDesktop(t, b)
}

// restartXorgWithout restarts cocoonbox-xorg.service (and the session
// that requires it) with the program at path out of the box's way, and
// fails the test, with the unit's journal, when the restart fails. The
// program is back in place when it returns.
func restartXorgWithout(t *testing.T, b *box.Box, path string) {
	t.Helper()
	b.Must(t, "mv", path, path+".hidden")
	res, err := b.Exec(box.Cmd{Args: []string{"systemctl", "restart", "cocoonbox-xorg.service"}})
	b.Must(t, "mv", path+".hidden", path)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		journal, _ := b.Run("journalctl", "-u", "cocoonbox-xorg.service", "--no-pager", "-n", "20")
		t.Fatalf("restarting cocoonbox-xorg.service with no %s in the box: exit %d, %s\n%s", path, res.ExitCode, strings.TrimSpace(res.Stderr), journal)
	}
}

// Contract: Desktop user. A server that has not reported is not active
// (here held in its keymap compile: xkbcomp made to hang), and one that
// ends before it reports fails the start at once, killed or exiting on
// its own (the display's lock held by a live process): the unit is
// failed long before the 30 s start timeout, where the old unit's
// xdpyinfo poll went on until its own 30 s were up. The box then starts
// its desktop again (the control: the same start succeeds).
func TestXorgNotYetReadyIsNotActiveAndEndingBeforeItFailsTheStart(t *testing.T) {
	b := bootDesk(t)
	b.Must(t, "systemctl", "stop", "cocoonbox-session.service", "cocoonbox-xorg.service")
	// No Restart= for this test: each failure stays the unit's last state.
	b.Must(t, "mkdir", "-p", "/run/systemd/system/cocoonbox-xorg.service.d")
	if err := b.WriteFile("/run/systemd/system/cocoonbox-xorg.service.d/50-test.conf", []byte("[Service]\nRestart=no\n"), 0o644, "root"); err != nil {
		t.Fatal(err)
	}
	b.Must(t, "systemctl", "daemon-reload")

	// failsSoon starts the unit without waiting for the job and waits for
	// the failure, after act (when not nil) has run on the activating unit.
	failsSoon := func(what string, act func()) {
		t.Helper()
		b.Must(t, "systemctl", "reset-failed", "cocoonbox-xorg.service")
		b.Must(t, "systemctl", "start", "--no-block", "cocoonbox-xorg.service")
		if act != nil {
			act()
		}
		// Far below the unit's 30 s start timeout (and the old poll's
		// 30 s): only a start that ends with its main process does this.
		box.Eventually(t, 15*time.Second, what+": cocoonbox-xorg.service failed", func() (bool, string) {
			state := xorgState(b)
			return strings.HasPrefix(state, "failed failed "), state
		})
		if active, _ := b.Run("systemctl", "is-active", "cocoonbox-session.service"); strings.TrimSpace(active) == "active" {
			t.Errorf("%s: cocoonbox-session.service is active on a failed server", what)
		}
	}

	// Held before its report: xkbcomp, which Xorg runs for the core
	// keyboard before it takes clients, never returns.
	b.Must(t, "mv", "/usr/bin/xkbcomp", "/usr/bin/xkbcomp.real")
	if err := b.WriteFile("/usr/bin/xkbcomp", []byte("#!/bin/sh\nexec sleep 86400.25\n"), 0o755, "root"); err != nil {
		t.Fatal(err)
	}
	failsSoon("Xorg killed before its report", func() {
		box.Eventually(t, 30*time.Second, "Xorg held in its keymap compile", func() (bool, string) {
			out, _ := b.Run("pgrep", "-f", "^sleep 86400.25$")
			return strings.TrimSpace(out) != "", "state " + xorgState(b)
		})
		// The promise: not active while the server does not take clients.
		if state := xorgState(b); !strings.HasPrefix(state, "activating start ") {
			t.Errorf("cocoonbox-xorg.service is %q while Xorg has not reported ready, want activating start", state)
		}
		// Its socket listens already, but nothing is served yet.
		if res, _ := asUser(b, "timeout 1 xwininfo -root >/dev/null"); res.ExitCode == 0 {
			t.Errorf("a client was served on :0 before Xorg reported ready: the test does not hold the server where it means to")
		}
		b.MustSh(t, "kill -KILL $(systemctl show -P MainPID cocoonbox-xorg.service)")
	})
	if got := xorgState(b); got != "failed failed signal" {
		t.Errorf("after Xorg was killed before its report the unit is %q, want failed failed signal", got)
	}
	b.Must(t, "mv", "-f", "/usr/bin/xkbcomp.real", "/usr/bin/xkbcomp")

	// Ending on its own before its report: :0's lock held by a live
	// process (the box's PID 1), so Xorg says "Server is already active
	// for display 0" and exits 1.
	b.MustSh(t, "printf '%10d\\n' 1 >/tmp/.X0-lock")
	failsSoon("Xorg exiting before its report", nil)
	if got := xorgState(b); got != "failed failed exit-code" {
		t.Errorf("after Xorg exited before its report the unit is %q, want failed failed exit-code", got)
	}
	b.Must(t, "rm", "-f", "/tmp/.X0-lock")

	// The control: the same start, with nothing in its way, succeeds and
	// the desktop comes back on it.
	b.Must(t, "rm", "-r", "/run/systemd/system/cocoonbox-xorg.service.d")
	b.Must(t, "systemctl", "daemon-reload")
	b.Must(t, "systemctl", "reset-failed", "cocoonbox-xorg.service")
	b.Must(t, "systemctl", "start", "cocoonbox-session.service")
	if got := xorgState(b); got != "active running success" {
		t.Errorf("cocoonbox-xorg.service is %q after the start, want active running success", got)
	}
	waitDesktop(t, b)
}
