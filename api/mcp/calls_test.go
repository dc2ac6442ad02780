package mcp_test

import (
	"context"
	"testing"
)

// Contract: OAuth for agents, Idle hibernate ("a call that only watches
// the box is none"): each tools/call opens one client call (Deps.Calls,
// boxes.Handler.Call in the api) around the tool, whose Boxes call runs
// under it, and ends it when the tool answers; the session's initialize,
// tools/list and its GET stream open none. Seen through the api's count
// of the calls open on the box (boxes.Service.OpenCalls), with the box's
// save held at the supervisor while the save's tool call waits on it.
func TestEachToolCallOpensOneClientCallAndNothingElseDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken) // initialize, and the session's GET stream
	if _, err := c.ClientSession.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	id := c.OK(t, "box_create", map[string]any{"name": "dev", "image": older})["box_id"].(string)
	c.OK(t, "box_status", map[string]any{"box": "dev"})
	if n := e.boxes().OpenCalls(id); n != 0 {
		t.Fatalf("after box_create and box_status answered, %d client calls are open on the box", n)
	}
	release := e.sup.Hold()
	defer release() // a failure's end too, so the api can close
	saved := make(chan error, 1)
	go func() {
		_, err := c.Try(context.Background(), "box_save", map[string]any{"box": "dev"}, "p")
		saved <- err
	}()
	c.WaitNotes(t, 1) // box_save's Boxes call is made, the tool waits on its operation
	if _, err := c.ClientSession.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := e.boxes().OpenCalls(id); n != 1 {
		t.Fatalf("while box_save waits (a tools/list beside it): %d client calls open on the box, want box_save's one", n)
	}
	release()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if n := e.boxes().OpenCalls(id); n != 0 {
		t.Fatalf("after box_save answered, %d client calls are open on the box", n)
	}
}
