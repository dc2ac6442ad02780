package wake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/internal/manualclock"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is a database with one user and box, and a store on the clock.
func env(t *testing.T) (*Store, *manualclock.Clock, string, string) {
	t.Helper()
	db := dbtest.New(t, users.Schema, boxes.Schema, Schema)
	ctx := context.Background()
	var user string
	if err := db.Pool.QueryRow(ctx, "INSERT INTO users (name, password_hash) VALUES ('alice', 'x') RETURNING id::text").Scan(&user); err != nil {
		t.Fatal(err)
	}
	box := "cb-0123456789abcdef"
	if _, err := db.Pool.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
		VALUES ($1, $2, 'main', 'cbdesk:v1-base', 'hibernated', 'local', $3)`, box, user, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	c := manualclock.New(time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC))
	return NewStore(db.Pool, c.Now), c, user, box
}

// A waker that counts each box's wakes and their request ids.
type wakes struct {
	mu   sync.Mutex
	reqs []string
	fail atomic.Bool
}

func (w *wakes) wake(_ context.Context, _, box, req string) error {
	if w.fail.Load() {
		return errors.New("the supervisor is away")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = append(w.reqs, box+" "+req)
	return nil
}

func (w *wakes) count() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.reqs) }

// Contract: Scheduled wake; issue 46, Deliver 3: a one-time wake fires
// once, at its time and not before, and sets SleepAt, which keeps idle
// hibernate off until it passes.
func TestAOneTimeWakeFiresOnceAtItsTimeAndKeepsTheBoxUpUntilSleepAt(t *testing.T) {
	st, c, user, box := env(t)
	ctx := context.Background()
	w := &wakes{}
	sc := NewScheduler(st, w.wake, nil)
	if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(90 * time.Second), KeepUp: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c.Add(89 * time.Second)
	if n, err := sc.Fire(ctx); err != nil || n != 0 {
		t.Fatalf("a second early: woke %d (%v)", n, err)
	}
	c.Add(time.Second)
	if n, err := sc.Fire(ctx); err != nil || n != 1 {
		t.Fatalf("on time: woke %d (%v)", n, err)
	}
	if n, _ := sc.Fire(ctx); n != 0 {
		t.Fatalf("a one-time wake fired again: %d", n)
	}
	if up, err := st.KeepUp(ctx, box); err != nil || !up {
		t.Fatalf("right after the wake KeepUp is %t (%v), want true (SleepAt ahead)", up, err)
	}
	c.Add(time.Hour)
	if up, _ := st.KeepUp(ctx, box); up {
		t.Fatal("at SleepAt KeepUp is still true")
	}
	ls, err := st.List(ctx, user, box)
	if err != nil || len(ls) != 1 || ls[0].Next != nil || ls[0].SleepAt == nil {
		t.Fatalf("list after the wake: %+v %v", ls, err)
	}
}

// A cron expression is read in its time zone, across a DST change.
func TestACronWakeFollowsItsTimeZone(t *testing.T) {
	st, c, user, box := env(t)
	ctx := context.Background()
	// 2026-03-28 22:00 UTC is 23:00 in Berlin (CET); 07:30 Berlin on the
	// 29th is CEST (the clocks went forward at 01:00 UTC): 05:30 UTC.
	s, err := st.Set(ctx, user, box, Spec{Cron: "30 7 * * *", TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 29, 5, 30, 0, 0, time.UTC); !s.Next.Equal(want) {
		t.Fatalf("next %s, want %s", s.Next.UTC(), want)
	}
	w := &wakes{}
	sc := NewScheduler(st, w.wake, nil)
	c.Set(time.Date(2026, 3, 29, 5, 30, 0, 0, time.UTC))
	if n, _ := sc.Fire(ctx); n != 1 {
		t.Fatalf("woke %d at 07:30 Berlin", n)
	}
	ls, _ := st.List(ctx, user, box)
	if want := time.Date(2026, 3, 30, 5, 30, 0, 0, time.UTC); ls[0].Next == nil || !ls[0].Next.Equal(want) {
		t.Fatalf("the following wake %v, want %s", ls[0].Next, want)
	}
}

// Issue 46: exactly one api acts. Two schedulers (two apis) on one
// database fire at once, many times: each due schedule wakes its box
// once.
func TestTwoSchedulersWakeEachDueScheduleOnce(t *testing.T) {
	st, c, user, box := env(t)
	ctx := context.Background()
	for i := range 10 {
		if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(time.Duration(i+1) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(time.Minute)
	w := &wakes{}
	a, b := NewScheduler(st, w.wake, nil), NewScheduler(st, w.wake, nil)
	var wg sync.WaitGroup
	for _, sc := range []*Scheduler{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := sc.Fire(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := w.count(); n != 10 {
		t.Fatalf("%d wakes for 10 due schedules: %q", n, w.reqs)
	}
	seen := map[string]bool{}
	for _, r := range w.reqs {
		if seen[r] {
			t.Fatalf("woken twice: %s", r)
		}
		seen[r] = true
	}
}

// A wake that fails leaves the schedule due; the next pass wakes it.
func TestAFailedWakeIsTriedAgain(t *testing.T) {
	st, c, user, box := env(t)
	ctx := context.Background()
	if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	w := &wakes{}
	w.fail.Store(true)
	sc := NewScheduler(st, w.wake, nil)
	if n, _ := sc.Fire(ctx); n != 0 {
		t.Fatalf("a failed wake counted: %d", n)
	}
	w.fail.Store(false)
	if n, _ := sc.Fire(ctx); n != 1 {
		t.Fatalf("the retry woke %d", n)
	}
}

// Bad input names the field and changes nothing; another user's box is
// not found; a schedule goes with its box.
func TestBadSchedulesAreRefusedAndSchedulesGoWithTheBox(t *testing.T) {
	st, c, user, box := env(t)
	ctx := context.Background()
	for _, bad := range []struct {
		sp          Spec
		field, rule string
	}{
		{Spec{}, "at", "is missing"},
		{Spec{At: c.Now().Add(-time.Second)}, "at", "is past"},
		{Spec{Cron: "61 * * * *"}, "cron", "is not five fields"},
		{Spec{Cron: "* * * * *", At: c.Now().Add(time.Hour)}, "at", "both given"},
		{Spec{Cron: "0 7 * * *", TimeZone: "Mars/Olympus"}, "time_zone", "not an IANA time zone"},
		{Spec{Cron: "0 7 * * *", KeepUp: 8 * 24 * time.Hour}, "keep_up", "is not 0 to"},
	} {
		_, err := st.Set(ctx, user, box, bad.sp)
		var fe *FieldError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || fe.Field != bad.field || !strings.Contains(fe.Rule, bad.rule) ||
			!strings.HasPrefix(err.Error(), "invalid schedule: "+bad.field+" ") {
			t.Errorf("%+v: %v, want a FieldError of %s saying %q", bad.sp, err, bad.field, bad.rule)
		}
	}
	if _, err := st.Set(ctx, "00000000-0000-4000-8000-000000000000", box, Spec{At: c.Now().Add(time.Hour)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another user's box: %v", err)
	}
	for range MaxPerBox {
		if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(time.Hour)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("one past MaxPerBox: %v", err)
	}
	if n, err := st.Clear(ctx, user, box, 0); err != nil || n != MaxPerBox {
		t.Fatalf("clear: %d %v", n, err)
	}
	if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, "DELETE FROM boxes WHERE id = $1", box); err != nil {
		t.Fatal(err)
	}
	if ls, err := st.List(ctx, user, ""); err != nil || len(ls) != 0 {
		t.Fatalf("after the box's delete: %d schedules (%v)", len(ls), err)
	}
}

// Run counts a pass once its Fire has answered (Scheduler.Passes, what a
// booted test waits on instead of the ticks): once the count moves past a
// due schedule, the schedule's wake was asked for, and each tick after is
// one more pass.
func TestRunCountsAPassOnceItsWakesWereAsked(t *testing.T) {
	st, c, user, box := env(t)
	ctx, stop := context.WithCancel(context.Background())
	w := &wakes{}
	sc := NewScheduler(st, w.wake, nil)
	if _, err := st.Set(ctx, user, box, Spec{At: c.Now().Add(time.Second), KeepUp: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	if n := sc.Passes(); n != 0 {
		t.Fatalf("before Run: %d passes", n)
	}
	done := make(chan struct{})
	go func() { sc.Run(ctx, 10*time.Millisecond); close(done) }()
	defer func() { stop(); <-done }()
	wait.Eventually(t, 30*time.Second, "Run's first pass", func() (bool, string) {
		n := sc.Passes()
		return n >= 1, fmt.Sprintf("%d passes, %d wakes", n, w.count())
	})
	if n := w.count(); n != 1 {
		t.Fatalf("after a pass the due schedule was woken %d times, want once", n)
	}
	from := sc.Passes()
	wait.Eventually(t, 30*time.Second, "three more passes", func() (bool, string) {
		n := sc.Passes()
		return n >= from+3, fmt.Sprintf("%d passes (from %d)", n, from)
	})
}
