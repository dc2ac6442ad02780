//go:build booted

package boxes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness/gate"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Deliver 2: at most max_operations operations run at once, max_queued
// wait their turn, and a call past both is refused ErrLimit
// (RESOURCE_EXHAUSTED) before anything is written; those queued run once
// a turn is free.
func TestOperationsPastTheQueueAreRefusedAndTheQueuedRunInTurn(t *testing.T) {
	g := gate.New(sup)
	e := newEnvWith(t, func(c *Config) {
		c.Hosts = map[string]sandbox.Supervisor{"local": g}
		c.MaxOperations, c.MaxQueued = 1, 1
	})
	t.Cleanup(g.Open)
	u := e.user("queue", 3, 3)
	ctx := context.Background()
	var ops []*Operation
	for _, name := range []string{"first", "second"} {
		_, op, err := e.s.Create(ctx, Call{UserID: u, RequestID: rid()}, CreateRequest{Name: name, Image: v1})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		ops = append(ops, op)
	}
	wait.Eventually(t, time.Minute, "one create at the gate", func() (bool, string) {
		now, _ := g.Held()
		return now == 1, ""
	})
	_, _, err := e.s.Create(ctx, Call{UserID: u, RequestID: rid()}, CreateRequest{Name: "third", Image: v1})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "boxes.max_queued 1") {
		t.Fatalf("a create past max_operations 1 and max_queued 1: %v; want ErrLimit naming boxes.max_queued", err)
	}
	if _, err := findBox(ctx, e.db.Pool, u, "third", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused create left a box row: %v", err)
	}
	g.Open()
	for _, op := range ops {
		e.wait(u, op)
	}
	if _, most := g.Held(); most != 1 {
		t.Errorf("%d creates reached the supervisor at once; max_operations is 1", most)
	}
	e.create(u, "third")
}

// A call holding the user's row lock and a runner's transaction adding an
// event of that user never wait on each other: the event's foreign key
// takes a key-share lock on the user, which the call's lock must not
// block, or the runner (holding the event lock) and the call (waiting
// for it) deadlock. One user's 50 creates and deletes at once met it.
func TestAnEventOfAUserDoesNotWaitForTheirCallsLock(t *testing.T) {
	e := newEnv(t)
	u := e.user("locks", 1, 1)
	ctx := context.Background()
	call, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer call.Rollback(ctx)
	if _, err := lockUser(ctx, call, u); err != nil {
		t.Fatal(err)
	}
	runner, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Rollback(ctx)
	var pid int
	if err := runner.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	added := make(chan error, 1)
	go func() { added <- addEvent(ctx, runner, u, "cb-0000000000000001", Running, nil) }()
	wait.Eventually(t, time.Minute, "the runner's event added, not waiting on a lock", func() (bool, string) {
		select {
		case err := <-added:
			if err != nil {
				t.Fatal(err)
			}
			return true, ""
		default:
		}
		var waiting bool
		e.db.Pool.QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting)
		if waiting {
			t.Fatal("the runner's event insert waits for the call's lock on the user (the call then waits for the event lock: deadlock)")
		}
		return false, "adding"
	})
}
