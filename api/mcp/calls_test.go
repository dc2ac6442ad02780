package mcp

import (
	"context"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

type callMark struct{}

// markedBoxes counts the Status calls that come under an open client call.
type markedBoxes struct {
	*fakeBoxes
	all, marked atomic.Int32
}

func (m *markedBoxes) Status(ctx context.Context, r *connect.Request[controlv1.BoxStatusRequest]) (*connect.Response[controlv1.BoxStatusResponse], error) {
	m.all.Add(1)
	if ctx.Value(callMark{}) != nil {
		m.marked.Add(1)
	}
	return m.fakeBoxes.Status(ctx, r)
}

// Contract: OAuth for agents, Idle hibernate ("a call that only watches
// the box is none"): each tools/call opens one client call (Deps.Calls,
// boxes.Handler.Call in the api) around the tool, whose Boxes call runs
// under it, and ends it when the tool answers; the session's initialize,
// tools/list and its GET stream open none.
func TestEachToolCallOpensOneClientCallAndNothingElseDoes(t *testing.T) {
	t.Parallel()
	var opened, ended atomic.Int32
	var mb *markedBoxes
	e := newEnv(t, func(d *Deps) {
		mb = &markedBoxes{fakeBoxes: d.Boxes.(*fakeBoxes)}
		d.Boxes = mb
		d.Calls = func(ctx context.Context) (context.Context, func()) {
			opened.Add(1)
			return context.WithValue(ctx, callMark{}, true), func() { ended.Add(1) }
		}
	})
	c := e.connect(e.aliceToken)
	if _, err := c.ClientSession.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := opened.Load(); n != 0 {
		t.Fatalf("initialize, tools/list and the GET stream opened %d client calls", n)
	}
	c.OK(t, "box_create", map[string]any{"name": "dev", "image": "cbdesk:v22-base"})
	c.OK(t, "box_status", map[string]any{"box": "dev"})
	if o, n := opened.Load(), ended.Load(); o != 2 || n != 2 {
		t.Fatalf("two tool calls: %d opened and %d ended; want 2 and 2", o, n)
	}
	if all, m := mb.all.Load(), mb.marked.Load(); all == 0 || m != all {
		t.Fatalf("%d of the tools' %d Status calls ran under the open call", m, all)
	}
}
