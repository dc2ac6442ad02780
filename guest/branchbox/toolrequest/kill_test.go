package toolrequest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// TestMain runs the test binary as a dispatcher when asked, so a test can
// SIGKILL a real process at a step and run the next one over what it left.
func TestMain(m *testing.M) {
	relayEndpointChild()
	if cfg := os.Getenv("DISPATCH_CHILD"); cfg != "" {
		os.Exit(child(cfg))
	}
	os.Exit(m.Run())
}

type childConfig struct {
	Spool  *Spool
	ID     string
	KillAt Step
}

// child dispatches as the config says and kills itself with SIGKILL when
// the named step is durable: no deferred cleanup, no flush, as a crash.
func child(cfg string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c.Spool.Trace = func(s Step) {
		if s == c.KillAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	if _, err := Dispatch(context.Background(), c.Spool, c.ID, 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChild starts a dispatcher of id over s, to be killed at step (""
// for the test to kill it itself).
func startChild(t *testing.T, s *Spool, id string, step Step) *exec.Cmd {
	t.Helper()
	cfg, err := json.Marshal(childConfig{Spool: s, ID: id, KillAt: step})
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = []string{"DISPATCH_CHILD=" + string(cfg)}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// killed waits for cmd and checks SIGKILL ended it.
func killed(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	err := cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the dispatcher was not killed: %v", err)
	}
}

// TestDispatcherKilledAtEachStep (Must show): the dispatcher SIGKILLed after
// the move, after the replay record, mid-relay and after the cached
// response, then run again. With exact-digest-replay-v1 the endpoint sees
// the request at most once more, and only when no response was cached;
// without it a claim recorded before the crash stays blocked (terminal).
// A cached response is returned in both.
func TestDispatcherKilledAtEachStep(t *testing.T) {
	const midRelay Step = "mid-relay"
	for _, c := range []struct {
		step   Step
		policy string
		// before is what the endpoint saw before the kill, after what it
		// saw in all once the second run is done; blocked: the second run
		// is refused by rule replay-claim.
		before, after int
		blocked       bool
	}{
		{StepClaimed, branchbox.ReplayExactDigest, 0, 1, false},
		{StepRecorded, branchbox.ReplayExactDigest, 0, 1, false},
		{midRelay, branchbox.ReplayExactDigest, 1, 2, false},
		{StepCached, branchbox.ReplayExactDigest, 1, 1, false},
		{StepClaimed, "", 0, 1, false},
		{StepRecorded, "", 0, 0, true},
		{midRelay, "", 1, 1, true},
		{StepCached, "", 1, 1, false},
	} {
		t.Run(fmt.Sprintf("%s/policy=%q", c.step, c.policy), func(t *testing.T) {
			held := make(chan struct{}, 1)
			e := branchboxtest.NewEndpoint(t)
			e.SetAnswer(func(frame []byte) []byte {
				if c.step == midRelay && e.Count() == 1 {
					held <- struct{}{}
					return e.Hold(frame)
				}
				return append(branchboxtest.Correlated(frame), '\n')
			})
			s := testSpool(t, e.Path, c.policy)
			write(t, s, "r", request("r", `{"deliver":"artifact"}`))
			if c.step == midRelay {
				cmd := startChild(t, s, "r", "")
				<-held
				cmd.Process.Signal(syscall.SIGKILL)
				killed(t, cmd)
			} else {
				killed(t, startChild(t, s, "r", c.step))
			}
			if e.Count() != c.before {
				t.Fatalf("before the kill the endpoint saw %d frames, want %d", e.Count(), c.before)
			}
			res, err := Dispatch(context.Background(), s, "r", 5*time.Second)
			switch {
			case c.blocked && branchbox.RuleOf(err) != branchbox.RuleReplay:
				t.Fatalf("second run: %v, want the claim blocked by rule %s", err, branchbox.RuleReplay)
			case c.blocked && len(responses(t, s)) != 0:
				t.Fatalf("a blocked claim wrote %v", responses(t, s))
			case !c.blocked && err != nil:
				t.Fatalf("second run: %v", err)
			case !c.blocked && res.Cached != (c.step == StepCached):
				t.Fatalf("second run: %+v", res)
			}
			if e.Count() != c.after {
				t.Fatalf("in all the endpoint saw %d frames, want %d", e.Count(), c.after)
			}
		})
	}
}
