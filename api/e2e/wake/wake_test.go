//go:build booted

package wake

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/manualclock"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// boxWait bounds the waits on a box: a save and a hibernate, or a wake.
const boxWait = 3 * time.Minute

// Issue 46, Must show (Contract: Scheduled wake, Idle user boxes), with
// two apis on one database and one clock, user boxes' idle hibernate at
// 3 s checked every second:
//   - the control: alice's box, with no schedule, is saved and hibernated
//     by the idle check;
//   - a wake set (through the second api) for 90 s ahead, at keep_up 1 h:
//     at 89 s the box is still hibernated after three passes of each
//     scheduler (waited on: Scheduler.Passes); at 90 s it is running
//     (waited on; the real time from the clock reaching it to the box
//     running is logged, not asserted), and
//     exactly one api acted: one "box woken on schedule" in the two apis'
//     logs, one ensure operation on the box;
//   - with SleepAt ahead the idle check leaves the running box up (it
//     says so, check after check, past the 3 s), and once the clock
//     passes SleepAt it saves and hibernates it.
func TestAScheduledWakeWakesTheBoxOnceWithTwoAPIsAndIdleHibernateWaitsForSleepAt(t *testing.T) {
	clock := manualclock.New(time.Now())
	var logs [2]syncbuf.Buffer
	opts := func(i int) []apitest.Option {
		return []apitest.Option{apitest.WithSupervisor("local", sup), apitest.WithClock(clock.Now),
			apitest.WithLog(slog.New(slog.NewTextHandler(&logs[i], nil))),
			apitest.WithConfig(func(c *config.Config) { c.OAuth.UserIdleHibernate, c.OAuth.IdleCheckEvery = 3*time.Second, time.Second })}
	}
	a := apitest.New(t, opts(0)...)
	t.Cleanup(func() {
		if t.Failed() { // the apis' lines about boxes, wakes and warnings
			for i := range logs {
				for _, l := range strings.Split(logs[i].String(), "\n") {
					if strings.Contains(l, "boxes:") || strings.Contains(l, "wake:") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
						t.Logf("api %d: %s", i, l)
					}
				}
			}
		}
	})
	b := apitest.New(t, append(opts(1), apitest.WithDatabaseOf(a))...)
	ctx := context.Background()
	tok := string(a.PersonalToken(a.User.ID))
	r, err := harness.Boxes(a.URL, tok).Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "create-main", Name: "main"}))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Msg.GetBox().GetBoxId()
	// state reads the box's row: a Status call would be a client call,
	// which keeps the box up as a user's would.
	state := func() string {
		var st string
		var op *string
		if err := a.Server.DB.Pool.QueryRow(ctx, "SELECT state, operation_id FROM boxes WHERE id = $1", id).Scan(&st, &op); err != nil {
			return err.Error()
		}
		if op != nil {
			return st + ", operation " + *op + " under way"
		}
		return st
	}
	waitState := func(want string) {
		t.Helper()
		wait.Eventually(t, boxWait, "box main "+want, func() (bool, string) {
			s := state()
			return s == want, s
		})
	}
	// The control: made and run, then idle, the box is taken by the idle check.
	waitState("hibernated")

	_, err = controlv1connect.NewSchedulesClient(harness.H2CClient, b.URL, connect.WithGRPC()).SetSchedule(ctx, bearer(tok,
		&controlv1.SetScheduleRequest{Box: "main", AtMs: clock.Now().Add(90 * time.Second).UnixMilli(), KeepUpSeconds: 3600}))
	if err != nil {
		t.Fatal(err)
	}
	woken := func() int {
		return strings.Count(logs[0].String()+logs[1].String(), `msg="wake: box woken on schedule"`)
	}
	clock.Add(89 * time.Second)
	// Three passes of each scheduler on the new time: a pass under way
	// may have read the clock before it moved, so four completed.
	from := [2]uint64{a.Wake.Passes(), b.Wake.Passes()}
	wait.Eventually(t, time.Minute, "three passes of each scheduler at 89 s", func() (bool, string) {
		pa, pb := a.Wake.Passes(), b.Wake.Passes()
		return pa >= from[0]+4 && pb >= from[1]+4, fmt.Sprintf("api 0 at %d passes (from %d), api 1 at %d (from %d)", pa, from[0], pb, from[1])
	})
	if s, n := state(), woken(); s != "hibernated" || n != 0 {
		t.Fatalf("a second before its wake the box is %s, woken %d times", s, n)
	}
	clock.Add(time.Second)
	due := time.Now()
	waitState("running")
	t.Logf("the box ran %s (real time) after the clock reached its wake", time.Since(due).Round(100*time.Millisecond))

	// SleepAt is an hour ahead: the idle check keeps the box up, saying
	// so, though it is idle past 3 s.
	stays := func() int {
		n := 0
		for _, l := range strings.Split(logs[0].String()+logs[1].String(), "\n") {
			if strings.Contains(l, `msg="boxes: idle box stays up: its scheduled wake is on"`) && strings.Contains(l, "box="+id) {
				n++
			}
		}
		return n
	}
	wait.Eventually(t, boxWait, "six idle checks keeping the box up", func() (bool, string) {
		return stays() >= 6, fmt.Sprintf("%d so far, the box %s", stays(), state())
	})
	if s := state(); s != "running" {
		t.Fatalf("with SleepAt ahead the box is %s", s)
	}
	var ensures int
	if err := a.Server.DB.Pool.QueryRow(ctx, "SELECT count(*) FROM box_operations WHERE box_id = $1 AND kind = 'ensure'", id).Scan(&ensures); err != nil {
		t.Fatal(err)
	}
	if n := woken(); n != 1 || ensures != 1 {
		t.Fatalf("the two apis woke the box %d times (%d ensure operations), want once", n, ensures)
	}

	// Past SleepAt the idle check takes it.
	clock.Add(time.Hour)
	waitState("hibernated")
}

// bearer is msg as a request with token as its Bearer.
func bearer[T any](token string, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set("Authorization", "Bearer "+token)
	return r
}
