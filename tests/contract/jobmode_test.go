//go:build booted

package contract

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// steady are units whose process must survive anything cbagent does.
// (Not polkit.service: D-Bus starts it at cbagent's first request.)
var steady = []string{"systemd-journald.service", "systemd-logind.service", "dbus.service",
	"cocoonbox-hostname.service", "cocoonbox-vault.service", "cocoonbox-machine-id.service"}

func mainPIDs(t *testing.T, b *box.Box) map[string]string {
	t.Helper()
	pids := map[string]string{}
	for _, u := range steady {
		pids[u] = show(t, b, u, "ActiveState") + " " + show(t, b, u, "MainPID")
	}
	return pids
}

// Contract: Desktop restart, "and nothing else". polkit sees the unit and
// the verb of cbagent's start, not its job mode (systemd v252 hands it no
// such detail), so a start of the session with --job-mode=isolate or flush
// passes the rule. What happens is pinned here (issue 18, item 10):
// isolate, which would stop every other unit, is refused by systemd itself
// because the session unit does not set AllowIsolate=; flush stops no unit
// (every steady unit keeps its process). What flush does do, and no rule
// can refuse, is cancel jobs still queued for other units (docs/contract.md,
// "Desktop restart", says so).
func TestDesktopRestartCbagentJobModesStopNothingElse(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	if got := show(t, b, session, "AllowIsolate"); got != "no" {
		t.Fatalf("%s has AllowIsolate=%s: cbagent's isolate would stop every other unit", session, got)
	}
	before := mainPIDs(t, b)
	res := systemctlAs(t, b, "cbagent", "start", "--job-mode=isolate", session)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "may not be isolated") {
		t.Errorf("cbagent's start --job-mode=isolate of %s: exit %d, %q; want systemd's refusal", session, res.ExitCode, res.Stderr)
	}
	for u, was := range mainPIDs(t, b) {
		if was != before[u] {
			t.Errorf("after cbagent's isolate, %s is %q, was %q", u, was, before[u])
		}
	}

	pid := show(t, b, session, "MainPID")
	res = systemctlAs(t, b, "cbagent", "restart", "--job-mode=flush", session)
	if res.ExitCode != 0 {
		t.Fatalf("cbagent's restart --job-mode=flush: exit %d: %s", res.ExitCode, res.Stderr)
	}
	if got := show(t, b, session, "MainPID"); got == pid || got == "0" {
		t.Errorf("the session was not restarted (MainPID %s → %s)", pid, got)
	}
	for u, was := range mainPIDs(t, b) {
		if was != before[u] {
			t.Errorf("after cbagent's flush, %s is %q, was %q: another unit was stopped", u, was, before[u])
		}
	}
}
