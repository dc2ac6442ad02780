//go:build booted

package contract

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Desktop restart. cbagent may start, stop and restart exactly
// cocoonbox-session.service, through polkit (polkitd runs in the box and
// reads /etc/polkit-1/rules.d/60-cocoonbox-cbagent.rules).
func TestDesktopRestartCbagentMayStartStopAndRestartTheSession(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	wantStat(t, b, "/etc/polkit-1/rules.d/60-cocoonbox-cbagent.rules", "644 root:root regular file")
	if show(t, b, session, "ActiveState") != "active" {
		t.Fatalf("%s is not active after boot", session)
	}
	mustAllow(t, b, "cbagent", "stop", session)
	if s := show(t, b, session, "ActiveState"); s != "inactive" {
		t.Errorf("after cbagent's stop: ActiveState=%s, want inactive", s)
	}
	mustAllow(t, b, "cbagent", "start", session)
	if s := show(t, b, session, "ActiveState"); s != "active" {
		t.Errorf("after cbagent's start: ActiveState=%s, want active", s)
	}
	before := show(t, b, session, "MainPID")
	mustAllow(t, b, "cbagent", "restart", session)
	after := show(t, b, session, "MainPID")
	if after == before || after == "0" {
		t.Errorf("after cbagent's restart: MainPID %s → %s, want a new process", before, after)
	}
	// The same call a serve makes, as the agent makes it: plain systemctl
	// stop|start, once more each.
	mustAllow(t, b, "cbagent", "stop", session)
	mustAllow(t, b, "cbagent", "start", session)
}

// Contract: Desktop restart, "and nothing else": every other verb on the
// session unit is refused, and leaves it as it was.
func TestDesktopRestartCbagentIsRefusedEveryOtherVerbOnTheSession(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	pid := show(t, b, session, "MainPID")
	for _, args := range [][]string{
		{"reload", session},
		{"try-restart", session},
		{"reload-or-restart", session},
		{"kill", session},
		{"kill", "--signal=SIGKILL", session},
		{"reset-failed", session},
		{"set-property", session, "CPUWeight=10"},
		{"enable", session},
		{"disable", session},
		{"mask", session},
		{"mask", "--runtime", session},
		{"daemon-reload"},
	} {
		mustRefuse(t, b, "cbagent", args...)
	}
	if got := show(t, b, session, "MainPID"); got != pid {
		t.Errorf("session MainPID %s → %s: a refused call changed it", pid, got)
	}
	if got, _ := b.Run("systemctl", "is-enabled", session); strings.TrimSpace(got) != "enabled" {
		t.Errorf("session is-enabled=%q after the refused calls, want enabled", strings.TrimSpace(got))
	}
	if got := show(t, b, session, "CPUWeight"); got == "10" {
		t.Error("cbagent's set-property CPUWeight=10 took effect")
	}
}

// Contract: Desktop restart, "exactly cocoonbox-session.service": start,
// stop and restart of any other unit are refused, also of one whose name
// only begins like the session's.
func TestDesktopRestartCbagentIsRefusedOtherUnits(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	unit := "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n"
	for _, name := range []string{"cbtest-other.service", "cocoonbox-session2.service", "cocoonbox-session-x.service"} {
		if err := b.WriteFile("/etc/systemd/system/"+name, []byte(unit), 0o644, "root"); err != nil {
			t.Fatal(err)
		}
	}
	b.Must(t, "systemctl", "daemon-reload")
	journald := show(t, b, "systemd-journald.service", "MainPID")
	for _, u := range []string{"systemd-journald.service", "systemd-logind.service", "polkit.service",
		"cbtest-other.service", "cocoonbox-session2.service", "cocoonbox-session-x.service"} {
		mustRefuse(t, b, "cbagent", "restart", u)
		mustRefuse(t, b, "cbagent", "start", u)
		mustRefuse(t, b, "cbagent", "stop", u)
	}
	if got := show(t, b, "systemd-journald.service", "MainPID"); got != journald {
		t.Errorf("journald MainPID %s → %s after cbagent's refused restart", journald, got)
	}
	if s := show(t, b, "cbtest-other.service", "ActiveState"); s != "inactive" {
		t.Errorf("cbtest-other.service is %s after cbagent's refused start", s)
	}
	// Control: root can start the test unit, so the refusal above is
	// polkit's and not a broken unit.
	b.Must(t, "systemctl", "start", "cbtest-other.service")
}

// Contract: Desktop user and Desktop restart: user restarts the session
// only through sudo; without it polkit refuses (no rule grants user
// anything, and there is no admin to ask).
func TestDesktopRestartUserNeedsSudoToRestartTheSession(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	pid := show(t, b, session, "MainPID")
	mustRefuse(t, b, "user", "restart", session)
	mustRefuse(t, b, "user", "stop", session)
	if got := show(t, b, session, "MainPID"); got != pid {
		t.Errorf("session MainPID %s → %s after user's refused restart", pid, got)
	}
	if _, err := b.RunAs("user", "sudo", "-n", "systemctl", "restart", session); err != nil {
		t.Errorf("sudo -n systemctl restart as user: %v", err)
	}
	if got := show(t, b, session, "MainPID"); got == pid {
		t.Error("sudo systemctl restart did not restart the session")
	}
}

// Contract: Desktop restart, "logind ends whatever user launched inside
// [the session]" (KillUserProcesses=yes for user only). A process of user
// is put into the session's scope, as a program launched from the desktop
// would be; when cbagent stops the session, logind ends it too.
func TestDesktopRestartSessionStopEndsWhatUserLaunchedInside(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	// What logind itself parsed from its configuration and our drop-in.
	if got := strings.TrimSpace(b.Must(t, "busctl", "get-property", "org.freedesktop.login1",
		"/org/freedesktop/login1", "org.freedesktop.login1.Manager", "KillUserProcesses")); got != "b true" {
		t.Errorf("logind KillUserProcesses = %q, want b true", got)
	}
	if got := strings.TrimSpace(b.Must(t, "busctl", "get-property", "org.freedesktop.login1",
		"/org/freedesktop/login1", "org.freedesktop.login1.Manager", "KillOnlyUsers")); got != `as 1 "user"` {
		t.Errorf("logind KillOnlyUsers = %q, want only user", got)
	}
	sessions := strings.Fields(b.Must(t, "loginctl", "show-user", "user", "-P", "Sessions"))
	if len(sessions) != 1 {
		t.Fatalf("user has sessions %v, want the one of %s", sessions, session)
	}
	scope := "session-" + sessions[0] + ".scope"
	if svc := strings.TrimSpace(b.Must(t, "loginctl", "show-session", sessions[0], "-P", "Service")); svc != "cocoonbox-session" {
		t.Fatalf("session %s was opened by PAM service %q, want cocoonbox-session", sessions[0], svc)
	}
	// A program user launched, detached (its own session id, as a desktop
	// app double-forks): moved into the scope the way the session's own
	// children are in it, for every cgroup hierarchy that has the scope.
	script := fmt.Sprintf(`set -e
cg=$(systemctl show -P ControlGroup %s)
runuser -u user -- setsid -f sleep 7777
# setsid -f returns before its child has exec'd sleep: wait for it (a
# single pgrep here failed one run in three), up to 2 minutes (5 s was
# near a loaded host's normal time).
pid=
for i in $(seq 2400); do pid=$(pgrep -u user -x -f 'sleep 7777') && break; sleep 0.05; done
[ -n "$pid" ] || { echo "user's sleep 7777 did not appear within 2 minutes" >&2; exit 1; }
for h in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do
  if [ -f "$h$cg/cgroup.procs" ]; then echo "$pid" >"$h$cg/cgroup.procs"; fi
done
grep -q "$cg\$" /proc/$pid/cgroup || { echo "pid $pid is not in $cg:" >&2; cat /proc/$pid/cgroup >&2; exit 1; }
echo "$pid"`, scope)
	pid := strings.TrimSpace(b.MustSh(t, script))
	mustAllow(t, b, "cbagent", "stop", session)
	box.Eventually(t, 20*time.Second, "user's program in "+scope+" ends with the session", func() (bool, string) {
		_, err := b.Run("kill", "-0", pid)
		return err != nil, "pid " + pid + " still runs"
	})
	// user's manager (user@1000: shuttle, the toolhost, Chrome) is not in
	// the session and stays: user lingers.
	if l := strings.TrimSpace(b.Must(t, "loginctl", "show-user", "user", "-P", "Linger")); l != "yes" {
		t.Errorf("user Linger=%s, want yes (else user@1000 ends with the session)", l)
	}
	if s := show(t, b, "user@1000.service", "ActiveState"); s != "active" {
		t.Errorf("user@1000.service is %s after the session stopped, want active (unaffected)", s)
	}
}
