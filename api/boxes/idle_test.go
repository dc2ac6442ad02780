//go:build booted

package boxes

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// idleWait bounds the waits of the idle tests: a few checks past a
// threshold of seconds, and a hibernate or a save.
const idleWait = 2 * time.Minute

// waitState waits until the box named name of userID is in state.
func (e *env) waitState(userID, name, state string) *Box {
	e.t.Helper()
	var b *Box
	box.Eventually(e.t, idleWait, name+" "+state, func() (bool, string) {
		b = e.box(userID, name)
		return b.State == state && b.OperationID == "", b.State + " " + b.OperationID
	})
	return b
}

// checksPast waits until the service has made n more idle checks than
// now: time enough for a box that was to be hibernated to be.
func (e *env) checksPast(n int64) {
	e.t.Helper()
	from := e.s.idleChecks.Load()
	box.Eventually(e.t, idleWait, "idle checks", func() (bool, string) {
		return e.s.idleChecks.Load() >= from+n, ""
	})
}

// Must show (Contract: OAuth for agents, Idle hibernate), with a 2.5 s
// threshold checked every second: an agent box with no client call
// hibernates, though a watcher follows its events (watching is no call);
// an agent box with a call open (Session.Exec's path: Call, then Locate)
// stays running through twice the threshold and more, and hibernates once
// the call ends (the control); a user's own box, with user boxes' idle
// hibernate off, stays running. A wake starts the clock again.
func TestAnIdleAgentBoxHibernatesAndOneWithAnOpenCallDoesNot(t *testing.T) {
	t.Parallel()
	const threshold = 2500 * time.Millisecond // not whole seconds: the query's parameters are float8
	e := newEnvWith(t, func(c *Config) { c.Idle = Idle{Agent: threshold, Every: time.Second} })
	ctx := context.Background()
	alice := e.user("alice", 1, 1)
	actx := WithAgent(ctx, &Agent{GrantID: "grant-1"})
	e.create(alice, "own")
	// The busy box's call is held open from its create (the Locate below
	// binds it) until endBusy.
	busyCtx, endBusy := e.s.Call(actx)
	defer endBusy()
	for _, c := range []struct {
		ctx  context.Context
		name string
	}{{actx, "idle"}, {busyCtx, "busy"}} {
		_, op, err := e.s.Create(c.ctx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: c.name, Image: v1})
		if err != nil {
			t.Fatal(err)
		}
		e.wait(alice, op)
	}
	if _, err := e.s.Locate(busyCtx, alice, "busy"); err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if _, err := e.s.Watch(watchCtx, alice, "idle", 0); err != nil {
		t.Fatal(err)
	}

	idle := e.waitState(alice, "idle", Hibernated)
	e.checksPast(int64(2*threshold/time.Second) + 3)
	if b := e.box(alice, "busy"); b.State != Running {
		t.Fatalf("the agent box with a call open is %s after twice the threshold", b.State)
	}
	if b := e.box(alice, "own"); b.State != Running {
		t.Fatalf("the user's own box is %s with user_idle_hibernate off", b.State)
	}

	// The call ends: the busy box hibernates in its turn.
	endBusy()
	e.waitState(alice, "busy", Hibernated)

	// A wake starts the clock again: the box runs, then hibernates again.
	before := time.Now()
	e.do(alice, e.s.Ensure, "idle")
	var activeAt time.Time
	if err := e.db.Pool.QueryRow(ctx, "SELECT active_at FROM boxes WHERE id = $1", idle.ID).Scan(&activeAt); err != nil {
		t.Fatal(err)
	}
	if activeAt.Before(before.Add(-time.Second)) {
		t.Fatalf("after the wake at %s the clock reads %s", before, activeAt)
	}
	e.waitState(alice, "idle", Hibernated)
}

// failingSave is the package's supervisor whose saves of the boxes in
// fail fail.
type failingSave struct {
	sandbox.Supervisor
	mu   sync.Mutex
	fail map[string]bool
}

func (f *failingSave) Save(ctx context.Context, id, name string) (sandbox.SaveInfo, error) {
	f.mu.Lock()
	fail := f.fail[id]
	f.mu.Unlock()
	if fail {
		return sandbox.SaveInfo{}, errors.New("the test's supervisor refuses this save")
	}
	return f.Supervisor.Save(ctx, id, name)
}

// Must show (Contract: OAuth for agents, Idle user boxes), with user boxes'
// idle hibernate at 3 s: an idle user box without an offload session
// (its inbox up, no session) is saved live first and then hibernated; one
// whose save fails is hibernated still, the save operation ended failed;
// an agent box stays up with agent boxes' idle hibernate off.
func TestAnIdleUserBoxIsSavedThenHibernatedAndAFailedSaveStillHibernates(t *testing.T) {
	t.Parallel()
	fs := &failingSave{Supervisor: sup, fail: map[string]bool{}}
	e := newEnvWith(t, func(c *Config) {
		c.Hosts = map[string]sandbox.Supervisor{"local": fs}
		c.Idle = Idle{User: 3 * time.Second, Every: time.Second}
	})
	ctx := context.Background()
	alice := e.user("alice", 2, 2)
	// Each held by an open call from its create, so neither is idle
	// before the test has set the failing save up.
	cctx, end := e.s.Call(ctx)
	var ids []string
	for _, name := range []string{"saved", "unsaved"} {
		b, op, err := e.s.Create(cctx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: name, Image: v1})
		if err != nil {
			t.Fatal(err)
		}
		e.wait(alice, op)
		if _, err := e.s.Locate(cctx, alice, name); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	_, op, err := e.s.Create(WithAgent(ctx, &Agent{GrantID: "grant-1"}), Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "agents", Image: v1})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(alice, op)
	fs.mu.Lock()
	fs.fail[ids[1]] = true
	fs.mu.Unlock()
	end()

	saved := e.waitState(alice, "saved", Hibernated)
	if saved.SaveID == "" {
		t.Fatal("the idle user box hibernated without its live save")
	}
	unsaved := e.waitState(alice, "unsaved", Hibernated)
	if unsaved.SaveID != "" {
		t.Fatalf("the box whose saves fail has save %s", unsaved.SaveID)
	}
	var kinds []string
	rows, err := e.db.Pool.Query(ctx, "SELECT kind || ' ' || phase FROM box_operations WHERE box_id = $1 ORDER BY started_at", ids[1])
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		kinds = append(kinds, k)
	}
	rows.Close()
	if len(kinds) != 3 || kinds[1] != "save failed" || kinds[2] != "hibernate done" {
		t.Fatalf("the operations of the box whose save fails: %q; want create, save failed, hibernate done", kinds)
	}
	e.checksPast(3)
	if b := e.box(alice, "agents"); b.State != Running {
		t.Fatalf("the agent box is %s with agent boxes' idle hibernate off", b.State)
	}
}
