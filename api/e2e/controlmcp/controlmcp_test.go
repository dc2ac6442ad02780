//go:build booted

package controlmcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// TestControlMCP drives the real api's control MCP with the go-sdk's own
// client over HTTP, on real boxes: bob's box, which his first box_ensure
// creates, and alice's, made on the older image by box_create, serve the
// subtests in order (max_boxes is 1: each leaves them as they were).
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
func TestControlMCP(t *testing.T) {
	h := start(t)
	alice, bob := mcptest.Connect(t, h.mcpURL, h.alice), mcptest.Connect(t, h.mcpURL, h.bob)
	var bobs, main map[string]any

	t.Run("a user without a box: box_status absent with empty strings, box_ensure creates one", func(t *testing.T) {
		got := bob.OK(t, "box_status", nil)
		want := `{"box_id":"","image":"","last_saved_at_ms":0,"latest_image":"","name":"","state":"absent","upgrade_available":false}`
		if s := mcptest.Canon(t, got); s != want {
			t.Fatalf("box_status without a box: %s, want %s", s, want)
		}
		bobs = bob.OK(t, "box_ensure", nil)
		if bobs["state"] != "running" || bobs["operation_id"] == "" {
			t.Fatalf("box_ensure without a box: %v", bobs)
		}
		if got := bob.OK(t, "box_status", nil); got["box_id"] != bobs["box_id"] || got["name"] != "main" || got["state"] != "running" {
			t.Fatalf("box_status after box_ensure: %v", got)
		}
	})

	t.Run("box_create with a progress token: one notification per phase, in order; a second client waiting on it gets its result too", func(t *testing.T) {
		second := make(chan map[string]any, 1)
		go func() {
			// Once the create is under way, another client of alice's
			// asks for the same box running: Ensure joins the create.
			alice.WaitNotes(t, 1)
			other := mcptest.Connect(t, h.mcpURL, h.alice)
			res, err := other.Try(context.Background(), "box_ensure", map[string]any{"box": "main"})
			if err != nil || res.IsError {
				t.Errorf("the second client's box_ensure: %v %v", err, res)
				second <- nil
				return
			}
			second <- res.StructuredContent.(map[string]any)
		}()
		main = alice.OK(t, "box_create", map[string]any{"name": "main", "image": "cbdesk:v1-base"}, "create-1")
		if main["name"] != "main" || main["state"] != "running" {
			t.Fatalf("box_create: %v", main)
		}
		phases := h.phases(t, main["operation_id"].(string))
		var msgs []string
		for i, n := range alice.WaitNotes(t, len(phases)) {
			if n.ProgressToken != "create-1" || n.Progress != float64(i+1) {
				t.Fatalf("notification %d: token %v, progress %v", i, n.ProgressToken, n.Progress)
			}
			msgs = append(msgs, strings.Fields(n.Message)[0])
		}
		if a, b := strings.Join(msgs, " "), strings.Join(phases, " "); a != b || !strings.HasPrefix(a, "creating") {
			t.Fatalf("progress of box_create: %s, want the operation's phases %s", a, b)
		}
		if got := <-second; got["operation_id"] != main["operation_id"] || got["box_id"] != main["box_id"] || got["state"] != "running" {
			t.Fatalf("the second client: %v, want the create's result %v", got, main)
		}
	})
	if bobs == nil || main == nil {
		t.FailNow()
	}
	id := main["box_id"].(string)

	t.Run("every tool's happy path", func(t *testing.T) {
		got := alice.OK(t, "box_list", nil)
		if list := got["boxes"].([]any); len(list) != 1 || list[0].(map[string]any)["box_id"] != id {
			t.Fatalf("box_list: %v", got)
		}
		if got := alice.OK(t, "box_ensure", map[string]any{"box": "main"}); got["operation_id"] != "" || got["state"] != "running" {
			t.Fatalf("box_ensure of a running box: %v, want operation_id \"\"", got)
		}
		got = alice.OK(t, "box_save", map[string]any{"box": id})
		if got["last_saved_at_ms"] == 0.0 || got["bytes"] == 0.0 || got["operation_id"] == "" {
			t.Fatalf("box_save: %v", got)
		}
		if got := alice.OK(t, "box_hibernate", nil); got["state"] != "hibernated" {
			t.Fatalf("box_hibernate: %v", got)
		}
		if got := alice.OK(t, "box_ensure", map[string]any{"box": "main", "wait": true}); got["state"] != "running" || got["operation_id"] == "" {
			t.Fatalf("box_ensure of the hibernated box: %v", got)
		}
		st := alice.OK(t, "box_status", map[string]any{"box": "main"})
		if st["upgrade_available"] != true || st["image"] != "cbdesk:v1-base" || st["latest_image"] != "cbdesk:v2-base" {
			t.Fatalf("box_status: %v, want v1 and an upgrade to v2 available", st)
		}
		got = alice.OK(t, "box_upgrade", map[string]any{"box": "main", "confirm": true})
		if got["image"] != "cbdesk:v2-base" || got["state"] != "running" {
			t.Fatalf("box_upgrade: %v, want cbdesk:v2-base and running", got)
		}
		if got := alice.OK(t, "usage", nil); got["default_cap"] != true || got["daily_cap_micros"] == 0.0 {
			t.Fatalf("usage: %v", got)
		}
	})

	t.Run("refusals are isError, protocol faults -32602, and nothing changes", func(t *testing.T) {
		for _, tc := range []struct {
			what, tool string
			args       map[string]any
			says       string
		}{
			{"box_delete without confirm", "box_delete", map[string]any{"box": "main"}, "confirm"},
			{"box_upgrade with confirm false", "box_upgrade", map[string]any{"box": "main", "confirm": false}, "confirm"},
			{"an unknown box name", "box_status", map[string]any{"box": "nope"}, "nope"},
			{"a box of another user", "box_hibernate", map[string]any{"box": bobs["box_id"]}, bobs["box_id"].(string)},
			{"a box of 10 KiB", "box_status", map[string]any{"box": strings.Repeat("a", 10<<10)}, "box: at most 64 bytes"},
		} {
			if msg := alice.Refused(t, tc.what, tc.tool, tc.args); !strings.Contains(msg, tc.says) {
				t.Errorf("%s: %q, want it to name %q", tc.what, msg, tc.says)
			}
		}
		for _, tc := range []struct {
			what, tool string
			args       map[string]any
		}{
			{"an unknown tool", "box_explode", nil},
			{"a wrong argument type", "box_ensure", map[string]any{"wait": "yes"}},
			{"an extra property", "box_status", map[string]any{"box": "main", "force": true}},
		} {
			if _, err := alice.Try(context.Background(), tc.tool, tc.args); mcptest.Code(err) != jsonrpc.CodeInvalidParams {
				t.Errorf("%s: %v, want -32602", tc.what, err)
			}
		}
		if got := alice.OK(t, "box_status", map[string]any{"box": "main"}); got["state"] != "running" {
			t.Fatalf("main after the refusals: %v", got)
		}
		if got := bob.OK(t, "box_status", nil); got["state"] != "running" {
			t.Fatalf("bob's box after alice's refused calls: %v", got)
		}
	})

	t.Run("a client that disconnects mid-operation leaves it running", func(t *testing.T) {
		before := alice.OK(t, "box_status", nil)["last_saved_at_ms"].(float64)
		c := mcptest.Connect(t, h.mcpURL, h.alice)
		ctx, cancel := context.WithCancel(context.Background())
		ended := make(chan error, 1)
		go func() {
			_, err := c.Try(ctx, "box_save", nil, "p")
			ended <- err
		}()
		c.WaitNotes(t, 1) // the save is under way
		cancel()
		c.Close()
		if err := <-ended; err == nil {
			t.Fatal("box_save answered its client, which had gone: the test did not disconnect mid-operation")
		}
		wait.Eventually(t, 2*time.Minute, "the save to finish after its client went", func() (bool, string) {
			st := alice.OK(t, "box_status", nil)
			return st["last_saved_at_ms"].(float64) > before && st["state"] == "running", mcptest.Canon(t, st)
		})
	})

	t.Run("a revoked token ends the call waiting on its operation, which runs on", func(t *testing.T) {
		carol := h.user(t, "carol")
		c := mcptest.Connect(t, h.mcpURL, carol)
		ended := make(chan error, 1)
		go func() {
			_, err := c.Try(context.Background(), "box_create", map[string]any{"name": "main"}, "p")
			ended <- err
		}()
		c.WaitNotes(t, 1) // creating
		acct := harness.Account(h.api.URL, carol)
		list, err := acct.ListDevices(context.Background(), connect.NewRequest(&controlv1.ListDevicesRequest{}))
		if err != nil || len(list.Msg.Devices) != 1 {
			t.Fatalf("carol's devices: %v %v", list, err)
		}
		if _, err := acct.RevokeDevice(context.Background(), connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: list.Msg.Devices[0].Id})); err != nil {
			t.Fatal(err)
		}
		if err := <-ended; err == nil {
			t.Fatal("box_create answered a client whose token was revoked while it waited")
		}
		// carol's box boots all the same; her new sign-in sees it running.
		again := mcptest.Connect(t, h.mcpURL, h.device(t, "carol"))
		wait.Eventually(t, 2*time.Minute, "carol's box to run after her token was revoked", func() (bool, string) {
			st := again.OK(t, "box_status", nil)
			return st["state"] == "running", mcptest.Canon(t, st)
		})
	})

	t.Run("box_delete", func(t *testing.T) {
		if got := alice.OK(t, "box_delete", map[string]any{"box": "main", "confirm": true}); got["box_id"] != id || got["operation_id"] == "" {
			t.Fatalf("box_delete: %v", got)
		}
		if got := alice.OK(t, "box_list", nil); len(got["boxes"].([]any)) != 0 {
			t.Fatalf("box_list after the delete: %v", got)
		}
	})
}

// phases are the phases of operation opID's steps, in order, from the
// Boxes service's event log (gRPC).
func (h *env) phases(t *testing.T, opID string) []string {
	t.Helper()
	var out []string
	for _, s := range h.steps(t, opID) {
		out = append(out, strings.ToLower(strings.TrimPrefix(s.Phase.String(), "PHASE_")))
	}
	return out
}
