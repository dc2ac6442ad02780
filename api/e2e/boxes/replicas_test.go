//go:build booted

package boxes

import (
	"context"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Must show: two api processes on one PostgreSQL driving one
// cocoonbox-sandboxd: no box is booted twice. Ten Ensures at once, half
// through each api, each with its own request id, for a user without a
// box: one box is made and booted once, and every call answers the one
// operation. Then, hibernated, ten Ensures at once again: one wake. An
// api's Events stream sees the other api's events.
func TestTwoAPIsOnOneDatabaseAndOneSandboxdNeverBootABoxTwice(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(), e.start()
	tok := e.user(a, "shared", 1)
	clients := []controlv1connect.BoxesClient{harness.Boxes(a.URL, tok), harness.Boxes(b.URL, tok)}
	e.accepted(clients...)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	watch, err := sandboxd.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	storm := func() map[string]bool {
		var mu sync.Mutex
		ops := map[string]bool{}
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := clients[i%2].Ensure(e.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: rid()}))
				if err != nil {
					t.Errorf("ensure %d through api %d: %v", i, i%2, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if r.Msg.Operation != nil {
					ops[r.Msg.Operation.OperationId] = true
				}
			}()
		}
		wg.Wait()
		return ops
	}
	ops := storm()
	if len(ops) != 1 {
		t.Fatalf("ten ensures for a user without a box began %d operations: %v", len(ops), ops)
	}
	var opID string
	for id := range ops {
		opID = id
	}
	list, err := clients[1].List(e.ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if err != nil || len(list.Msg.Boxes) != 1 {
		t.Fatalf("boxes: %v %v", list, err)
	}
	bx := list.Msg.Boxes[0]
	// Followed through the api that may not have run it: its LISTEN sees the other's events.
	for _, c := range clients {
		if last := e.until(c, bx.BoxId, opID, ended); last.Phase != controlv1.Phase_PHASE_DONE {
			t.Fatalf("the ensure ended %s: %s", last.Phase, last.Error)
		}
	}
	r, err := clients[0].Hibernate(e.ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: rid(), Box: bx.BoxId}))
	if err != nil {
		t.Fatal(err)
	}
	e.done(clients[1], r.Msg)
	ops = storm()
	if len(ops) != 1 {
		t.Fatalf("ten ensures of a hibernated box began %d operations: %v", len(ops), ops)
	}
	for id := range ops {
		e.until(clients[0], bx.BoxId, id, ended)
	}
	e.agree()
	// The supervisor's own record: booted once (stopped → starting →
	// running), frozen once, woken once.
	var seen []sandbox.State
	for ev := range watch {
		if ev.Machine != bx.BoxId {
			continue
		}
		seen = append(seen, ev.State)
		if len(seen) == 5 {
			break
		}
	}
	want := []sandbox.State{sandbox.Stopped, sandbox.Starting, sandbox.Running, sandbox.Hibernated, sandbox.Running}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("the machine's states %v, want %v", seen, want)
		}
	}
	if m, err := sandboxd.Get(e.ctx, bx.BoxId); err != nil || m.State != sandbox.Running {
		t.Fatalf("the machine: %+v %v", m, err)
	}
	cancel()
	for ev := range watch {
		if ev.Machine == bx.BoxId {
			t.Fatalf("a further state %s of the machine: booted or woken twice", ev.State)
		}
	}
}
