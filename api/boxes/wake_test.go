//go:build booted

package boxes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Must show: hibernate then Ensure keeps a process started before (memory
// kept), gives a new wake_id and machine-id, and `journalctl -m` shows
// both machine ids; twenty cycles in a row all succeed, and a file written
// just before each hibernate is there after each wake.
func TestHibernateThenEnsureTwentyTimesKeepsAProcessAndEachFileWithANewWakeAndMachineID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("sleeper", 1, 1)
	b := e.create(u, "sleeper")
	// setsid, not a process group leader in a shell without job control,
	// execs sleep in its own pid: $! is the sleeper, in a session of its own.
	pid := strings.TrimSpace(sh(t, b.ID, `setsid sleep infinity </dev/null >/dev/null 2>&1 & echo $!`))
	ctx := context.Background()
	mids := map[string]bool{b.MachineID: true}
	wakes := map[string]bool{b.WakeID: true}
	for i := 1; i <= 20; i++ {
		sh(t, b.ID, fmt.Sprintf("echo cycle-%d >/home/user/cycle-%d && sync", i, i))
		_, op, err := e.s.Hibernate(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name})
		if err != nil {
			t.Fatalf("hibernate %d: %v", i, err)
		}
		e.wait(u, op)
		if got := e.box(u, b.ID); got.State != Hibernated {
			t.Fatalf("after hibernate %d the box is %s", i, got.State)
		}
		if m, _ := sup.Get(ctx, b.ID); m.State != sandbox.Hibernated {
			t.Fatalf("after hibernate %d the machine is %s", i, m.State)
		}
		_, op, err = e.s.Ensure(ctx, Call{UserID: u, RequestID: rid(), Box: b.ID})
		if err != nil || op == nil {
			t.Fatalf("ensure %d: %v (operation %v)", i, err, op)
		}
		steps := e.wait(u, op)
		if steps[0].Phase.String() != "PHASE_WAKING" {
			t.Fatalf("ensure %d began in %s, want waking", i, steps[0].Phase)
		}
		w := e.box(u, b.ID)
		if w.State != Running || w.Incarnation != 1 {
			t.Fatalf("after wake %d: state %s incarnation %d (a wake keeps the incarnation)", i, w.State, w.Incarnation)
		}
		if got := sh(t, b.ID, fmt.Sprintf("cat /home/user/cycle-%d", i)); got != fmt.Sprintf("cycle-%d\n", i) {
			t.Fatalf("after wake %d the file holds %q", i, got)
		}
		sh(t, b.ID, "kill -0 "+pid)
		if wakes[w.WakeID] || mids[w.MachineID] {
			t.Fatalf("wake %d: wake_id %s or machine-id %s seen before", i, w.WakeID, w.MachineID)
		}
		wakes[w.WakeID], mids[w.MachineID] = true, true
		rec, err := identity.Parse([]byte(sh(t, b.ID, "cat "+identity.Path)))
		if err != nil || rec.WakeID != w.WakeID {
			t.Fatalf("wake %d: the box's identity %+v (%v), the api wrote wake %s", i, rec, err, w.WakeID)
		}
		if i == 1 {
			// journald follows the new machine-id (cocoonbox-machine-id.path);
			// -m reads both directories.
			sh(t, b.ID, "journalctl --flush")
			box.Eventually(t, 15*time.Second, "journalctl -m shows both machine ids", func() (bool, string) {
				sh(t, b.ID, "systemd-cat -t boxes-test echo after-wake")
				out := sh(t, b.ID, "journalctl --flush; journalctl -m -o export --output-fields=_MACHINE_ID | sed -n 's/^_MACHINE_ID=//p' | sort -u")
				return strings.Contains(out, b.MachineID) && strings.Contains(out, w.MachineID), out
			})
		}
	}
	if out := strings.TrimSpace(sh(t, b.ID, "systemctl is-system-running || true")); out != "running" {
		t.Errorf("after 20 cycles systemd says %q; failed units:\n%s", out, sh(t, b.ID, "systemctl --failed --no-legend; journalctl -b -p warning -o short --no-pager | tail -40"))
	}
}

// A wake that comes while a hibernate is under way cancels it: the
// hibernate ends failed (cancelled) and the box runs. The hibernate is held
// under way by the test taking the box's advisory lock, as a runner of
// another api would hold it.
func TestEnsureDuringAHibernateCancelsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("canceller", 1, 1)
	b := e.create(u, "canceller")
	ctx := context.Background()
	release := e.hold(b.ID)
	_, hib, err := e.s.Hibernate(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.box(u, b.ID); got.State != Hibernating || got.OperationID != hib.ID {
		t.Fatalf("the box is %s with operation %q, want hibernating under %s", got.State, got.OperationID, hib.ID)
	}
	_, ens, err := e.s.Ensure(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name})
	if err != nil || ens == nil {
		t.Fatalf("ensure: %v %v", ens, err)
	}
	release()
	last, err := e.s.WaitOperation(ctx, u, hib.ID, nil)
	if err != nil || last.Phase.String() != "PHASE_FAILED" || !strings.Contains(last.Error, "cancelled") {
		t.Fatalf("the hibernate ended %v (%v), want failed: cancelled", last, err)
	}
	e.wait(u, ens)
	if got := e.box(u, b.ID); got.State != Running {
		t.Fatalf("after the ensure the box is %s", got.State)
	}
	if m, _ := sup.Get(ctx, b.ID); m.State != sandbox.Running {
		t.Fatalf("after the ensure the machine is %s", m.State)
	}
}
