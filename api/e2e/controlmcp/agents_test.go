//go:build booted

package controlmcp

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
)

// An agent's token (cba_, a grant alice approved) on the real api's control
// MCP reaches only the boxes its grant created, within its caps: box_list
// shows them alone, a name or id of alice's own box or of another grant's
// is answered as a box that does not exist, the first box is the grant's,
// box_ensure without one creates the grant's first box (agent), a third
// box_create under max_boxes 2 is refused naming the cap, a second box
// while the first starts under max_running 1 naming that one; usage is the whole account's; alice's own
// token sees every box.
//
// Contract: OAuth for agents, what a grant reaches; issue 27, Deliver 5
// and Must show (caps).
func TestAnAgentReachesOnlyItsGrantsBoxesWithinItsCaps(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	con, err := harness.SignIn(ctx, h.api.URL, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(name string, maxBoxes, maxRunning int) *mcptest.Client {
		tok, err := con.Agent(ctx, name, maxBoxes, maxRunning)
		if err != nil || !strings.HasPrefix(tok, "cba_") {
			t.Fatalf("sign agent %s in: %q %v", name, tok, err)
		}
		return mcptest.Connect(t, h.mcpURL, tok)
	}
	alice := mcptest.Connect(t, h.mcpURL, h.alice)
	a, b := grant("agent A", 2, 2), grant("agent B", 2, 1)
	names := func(c *mcptest.Client) []string {
		var out []string
		for _, x := range c.OK(t, "box_list", nil)["boxes"].([]any) {
			out = append(out, x.(map[string]any)["name"].(string))
		}
		slices.Sort(out)
		return out
	}

	mine := alice.OK(t, "box_create", map[string]any{"name": "mine", "wait": false})
	if got := names(a); len(got) != 0 {
		t.Fatalf("agent A's box_list before it made any: %v, want none (alice's own box is not its)", got)
	}
	if got := a.OK(t, "box_status", nil); got["state"] != "absent" || got["box_id"] != "" {
		t.Fatalf("agent A's box_status before it made any: %v, want absent", got)
	}
	for _, ref := range []string{"mine", mine["box_id"].(string)} {
		if got := a.Refused(t, "agent A on alice's own box "+ref, "box_hibernate", map[string]any{"box": ref}); !strings.Contains(got, "no such box") {
			t.Errorf("agent A's box_hibernate of alice's box %s: %q, want no such box", ref, got)
		}
	}

	a1 := a.OK(t, "box_create", map[string]any{"name": "a1", "wait": false})
	a.OK(t, "box_create", map[string]any{"name": "a2", "wait": false})
	third := a.Refused(t, "a third box_create under max_boxes 2", "box_create", map[string]any{"name": "a3", "wait": false})
	if !strings.Contains(third, "max_boxes") || !strings.Contains(third, "max_boxes is 2") {
		t.Fatalf("a third box_create under max_boxes 2: %q, want it refused naming max_boxes", third)
	}
	if got := names(a); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("agent A's box_list: %v, want a1 a2", got)
	}
	if got := a.OK(t, "box_status", nil); got["box_id"] != a1["box_id"] {
		t.Fatalf("agent A's first box: %v, want a1 (%v)", got, a1["box_id"])
	}

	for _, ref := range []string{"a1", a1["box_id"].(string)} {
		if got := b.Refused(t, "agent B on agent A's box "+ref, "box_status", map[string]any{"box": ref}); !strings.Contains(got, "no such box") {
			t.Errorf("agent B's box_status of agent A's box %s: %q, want no such box", ref, got)
		}
		if got := b.Refused(t, "agent B deleting agent A's box "+ref, "box_delete", map[string]any{"box": ref, "confirm": true}); !strings.Contains(got, "no such box") {
			t.Errorf("agent B's box_delete of agent A's box %s: %q, want no such box", ref, got)
		}
	}
	first := b.OK(t, "box_ensure", map[string]any{"wait": false})
	if got := b.OK(t, "box_status", nil); got["name"] != "agent" || got["box_id"] != first["box_id"] {
		t.Fatalf("agent B's box_ensure without a box: %v, then box_status %v; want its first box, named agent", first, got)
	}
	if got := b.Refused(t, "a second box starting under max_running 1", "box_create", map[string]any{"name": "b2", "wait": false}); !strings.Contains(got, "max_running is 1") {
		t.Errorf("agent B's second box_create while its first starts: %q, want refused naming max_running", got)
	}
	if got := names(b); !slices.Equal(got, []string{"agent"}) {
		t.Fatalf("agent B's box_list: %v, want agent", got)
	}

	if u := a.OK(t, "usage", nil); u["daily_cap_micros"] != alice.OK(t, "usage", nil)["daily_cap_micros"] {
		t.Errorf("agent A's usage %v is not alice's account's", u)
	}
	if got := names(alice); !slices.Equal(got, []string{"a1", "a2", "agent", "mine"}) {
		t.Fatalf("alice's own box_list: %v, want every box, the agents' too", got)
	}
}
