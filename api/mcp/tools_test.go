package mcp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/mcp"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
)

// tools/list answers exactly the tool table: the names, the descriptions
// and the schemas written in tools.go, and docs/control-mcp.md shows the
// same descriptions (Contract: Control MCP, tool descriptions).
func TestToolsListIsTheTableAndTheDocs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	list, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := mcp.ToolSpecs()
	if len(list.Tools) != len(specs) {
		t.Fatalf("%d tools, want %d", len(list.Tools), len(specs))
	}
	docs, err := os.ReadFile("../../docs/control-mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		var found bool
		for _, tl := range list.Tools {
			if tl.Name != s.Name {
				continue
			}
			found = true
			if tl.Description != s.Description {
				t.Errorf("%s: description %q, want %q", s.Name, tl.Description, s.Description)
			}
			if a, b := mcptest.Canon(t, tl.Annotations), mcptest.Canon(t, s.Annotations); a != b || tl.Title != s.Annotations.Title {
				t.Errorf("%s: annotations %s (title %q), want %s", s.Name, a, tl.Title, b)
			}
			if a, b := mcptest.Canon(t, tl.InputSchema), canonText(t, s.Input); a != b {
				t.Errorf("%s: input schema %s, want %s", s.Name, a, b)
			}
			if a, b := mcptest.Canon(t, tl.OutputSchema), canonText(t, s.Output); a != b {
				t.Errorf("%s: output schema %s, want %s", s.Name, a, b)
			}
		}
		if !found {
			t.Errorf("tools/list has no %s", s.Name)
		}
		if row := "| `" + s.Name + "` | " + s.Description + " |"; !strings.Contains(string(docs), row) {
			t.Errorf("docs/control-mcp.md has no row %q", row)
		}
		if row := "| `" + s.Name + "` | " + s.Annotations.Title + " | " + hints(s.Annotations) + " |"; !strings.Contains(string(docs), row) {
			t.Errorf("docs/control-mcp.md has no annotations row %q", row)
		}
	}
}

// hints are a tool's annotations in words, as docs/control-mcp.md's
// annotations table shows them.
func hints(a *sdk.ToolAnnotations) string {
	if a.ReadOnlyHint {
		return "read-only"
	}
	kind := "additive"
	if *a.DestructiveHint {
		kind = "destructive"
	}
	if a.IdempotentHint {
		kind += ", idempotent"
	}
	return kind
}

func canonText(t *testing.T, s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return mcptest.Canon(t, v)
}

// Every tool's happy path, each result checked against its published
// output schema and its text block (Contract: Control MCP, results).
func TestEveryToolHappyPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	got := c.OK(t, "box_create", map[string]any{"name": "dev", "image": older})
	id := got["box_id"].(string)
	if got["name"] != "dev" || got["state"] != "running" || got["operation_id"] == "" {
		t.Fatalf("box_create: %v", got)
	}
	got = c.OK(t, "box_list", nil)
	if list := got["boxes"].([]any); len(list) != 1 || list[0].(map[string]any)["box_id"] != id || list[0].(map[string]any)["image"] != older {
		t.Fatalf("box_list: %v", got)
	}
	got = c.OK(t, "box_status", map[string]any{"box": "dev"})
	if got["box_id"] != id || got["upgrade_available"] != true || got["latest_image"] != latest || got["last_saved_at_ms"] != 0.0 {
		t.Fatalf("box_status: %v", got)
	}
	got = c.OK(t, "box_ensure", map[string]any{})
	if got["state"] != "running" || got["operation_id"] != "" {
		t.Fatalf("box_ensure of a running box: %v, want operation_id \"\"", got)
	}
	e.putFile(id, "/home/user/work.txt", 4096) // what the save holds
	got = c.OK(t, "box_save", map[string]any{"box": id})
	if got["bytes"] != 4096.0 || got["last_saved_at_ms"] == 0.0 || got["operation_id"] == "" {
		t.Fatalf("box_save: %v", got)
	}
	got = c.OK(t, "box_hibernate", map[string]any{"box": "dev"})
	if got["state"] != "hibernated" {
		t.Fatalf("box_hibernate: %v", got)
	}
	got = c.OK(t, "box_ensure", map[string]any{"box": "dev"})
	if got["state"] != "running" || got["operation_id"] == "" {
		t.Fatalf("box_ensure of a hibernated box: %v", got)
	}
	got = c.OK(t, "box_upgrade", map[string]any{"box": "dev", "confirm": true})
	if got["image"] != latest || got["state"] != "running" {
		t.Fatalf("box_upgrade: %v", got)
	}
	got = c.OK(t, "usage", nil)
	if got["daily_cap_micros"] != float64(boxes.DefaultDailyCapMicros) || got["default_cap"] != true || got["today"] != 0.0 {
		t.Fatalf("usage: %v", got)
	}
	got = c.OK(t, "box_delete", map[string]any{"box": "dev", "confirm": true})
	if got["box_id"] != id || got["operation_id"] == "" {
		t.Fatalf("box_delete: %v", got)
	}
	if got = c.OK(t, "box_list", nil); len(got["boxes"].([]any)) != 0 {
		t.Fatalf("box_list after the delete: %v", got)
	}
}

// A user without a box: box_status answers absent with empty strings,
// box_ensure creates one (Contract: Control MCP, field types).
func TestNoBoxIsAbsentAndEnsureCreatesOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	got := c.OK(t, "box_status", nil)
	want := `{"box_id":"","image":"","last_saved_at_ms":0,"latest_image":"","name":"","state":"absent","upgrade_available":false}`
	if s := mcptest.Canon(t, got); s != want {
		t.Fatalf("box_status without a box: %s, want %s", s, want)
	}
	got = c.OK(t, "box_ensure", nil)
	if got["state"] != "running" || got["box_id"] == "" || got["operation_id"] == "" {
		t.Fatalf("box_ensure without a box: %v", got)
	}
	if got = c.OK(t, "box_status", nil); got["state"] != "running" {
		t.Fatalf("box_status after box_ensure: %v", got)
	}
}

// With a progress token: one notification per step, in order; without
// one, none (Contract: Control MCP, progress). That they come ahead of
// the result on the wire: TestProgressComesBeforeTheResult.
func TestProgressOnePerStepOnlyWithAToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	id := c.OK(t, "box_create", map[string]any{"name": "a"}, "tok-1")["box_id"].(string)
	var msgs []string
	for i, n := range c.WaitNotes(t, 2) {
		if n.ProgressToken != "tok-1" || n.Progress != float64(i+1) {
			t.Fatalf("notification %d: token %v progress %v", i, n.ProgressToken, n.Progress)
		}
		msgs = append(msgs, n.Message)
	}
	if strings.Join(msgs, ",") != "creating,done" {
		t.Fatalf("progress of box_create: %q, want creating,done", msgs)
	}
	c.OK(t, "box_hibernate", map[string]any{"box": "a"})
	c.OK(t, "box_ensure", map[string]any{"box": "a"})
	e.putFile(id, "/home/user/work.txt", 4096) // what the save holds
	c.OK(t, "box_save", map[string]any{"box": "a"}, 7)
	// The save's three steps are the next three: the calls between had no token.
	if n := c.WaitNotes(t, 5); len(n) != 5 || n[2].Message != "saving" || n[3].Message != "saving 4096 bytes" || n[4].Message != "done 4096 bytes" || n[2].ProgressToken != 7.0 {
		t.Fatalf("progress of box_save: %+v", n[2:])
	}
}

// Refusals are isError with one text block, and change nothing (Contract:
// Control MCP, errors).
func TestRefusalsAreIsErrorAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	c.OK(t, "box_create", map[string]any{"name": "dev"})
	bob := e.connect(e.bobToken)
	bobs := bob.OK(t, "box_create", map[string]any{"name": "bobs"})

	for _, tc := range []struct {
		what, tool string
		args       map[string]any
		says       string
	}{
		{"box_delete without confirm", "box_delete", map[string]any{"box": "dev"}, "confirm: must be true"},
		{"box_delete with confirm false", "box_delete", map[string]any{"box": "dev", "confirm": false}, "confirm: must be true"},
		{"box_upgrade with confirm false", "box_upgrade", map[string]any{"confirm": false}, "confirm: must be true"},
		{"an unknown box name", "box_status", map[string]any{"box": "nope"}, "no such box"},
		{"a box of another user, by id", "box_hibernate", map[string]any{"box": bobs["box_id"]}, "no such box"},
		{"a box of another user, by name", "box_delete", map[string]any{"box": "bobs", "confirm": true}, "no such box"},
		{"a box of 10 KiB", "box_status", map[string]any{"box": strings.Repeat("a", 10<<10)}, "box: at most 64 bytes"},
		{"a name taken", "box_create", map[string]any{"name": "dev"}, `has a box named "dev" already`},
	} {
		if msg := c.Refused(t, tc.what, tc.tool, tc.args); !strings.Contains(msg, tc.says) || len(msg) > 512 {
			t.Errorf("%s: %q, want it to say %q, briefly", tc.what, msg, tc.says)
		}
	}
	if got := c.OK(t, "box_status", map[string]any{"box": "dev"}); got["state"] != "running" || got["image"] != latest {
		t.Fatalf("dev after the refusals: %v", got)
	}
	if got := bob.OK(t, "box_list", nil); len(got["boxes"].([]any)) != 1 {
		t.Fatalf("bob's boxes after alice's refused calls: %v", got)
	}
}

// Arguments that do not match the schema and an unknown tool are -32602
// (Contract: Control MCP, errors).
func TestBadArgumentsAndUnknownToolsAreInvalidParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	for _, tc := range []struct {
		what, tool string
		args       map[string]any
	}{
		{"an unknown tool", "box_explode", nil},
		{"a non-boolean wait", "box_ensure", map[string]any{"wait": "yes"}},
		{"a number for box", "box_status", map[string]any{"box": 7}},
		{"an extra property", "box_status", map[string]any{"box": "dev", "force": true}},
		{"an extra property of a tool without arguments", "usage", map[string]any{"x": 1}},
		{"box_create without name", "box_create", map[string]any{"image": "cbdesk:v22-base"}},
		{"box_delete without box", "box_delete", map[string]any{"confirm": true}},
		{"a string confirm", "box_upgrade", map[string]any{"confirm": "true"}},
	} {
		_, err := c.Try(context.Background(), tc.tool, tc.args)
		if mcptest.Code(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want JSON-RPC -32602", tc.what, err)
		}
	}
	if got := c.OK(t, "box_list", nil); len(got["boxes"].([]any)) != 0 {
		t.Fatalf("boxes after the refused calls: %v", got)
	}
}

// Two clients waiting on the same box's operation both get its result.
func TestTwoClientsWaitingOnOneOperationBothGetItsResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.connect(e.aliceToken), e.connect(e.aliceToken)
	a.OK(t, "box_create", map[string]any{"name": "dev"})
	a.OK(t, "box_hibernate", nil)
	release := e.sup.Hold()
	defer release() // a failure's end too, so the api can close
	results := make(chan map[string]any, 2)
	for _, c := range []*mcptest.Client{a, b} {
		go func() {
			res, err := c.Try(context.Background(), "box_ensure", map[string]any{"box": "dev"}, "p")
			if err != nil || res.IsError {
				t.Errorf("box_ensure: %v %v", err, res)
				results <- nil
				return
			}
			results <- res.StructuredContent.(map[string]any)
		}()
	}
	// Both are waiting once each has had the first step of the wake.
	a.WaitNotes(t, 1)
	b.WaitNotes(t, 1)
	release()
	r1, r2 := <-results, <-results
	if r1 == nil || r2 == nil || r1["operation_id"] != r2["operation_id"] || r1["operation_id"] == "" || r1["state"] != "running" || r2["state"] != "running" {
		t.Fatalf("the two waiters: %v and %v, want one operation's result", r1, r2)
	}
}

// A failure inside the api is -32603, its cause logged and not sent
// (Contract: Control MCP, errors).
func TestInternalFailureIsInternalError(t *testing.T) {
	t.Parallel()
	var log syncbuf.Buffer
	e := newEnv(t, apitest.WithLog(slog.New(slog.NewTextHandler(&log, nil))))
	c := e.connect(e.aliceToken)
	// The api's table of boxes gone: the service's read of it fails inside.
	if _, err := e.api.DB.Pool.Exec(context.Background(), "ALTER TABLE boxes RENAME TO boxes_away"); err != nil {
		t.Fatal(err)
	}
	const cause = `does not exist (SQLSTATE 42P01)` // relation "boxes", quoted in the log's text
	_, err := c.Try(context.Background(), "box_list", nil)
	if mcptest.Code(err) != jsonrpc.CodeInternalError || strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("box_list failing inside: %v, want -32603 without the cause", err)
	}
	if !strings.Contains(log.String(), cause) {
		t.Fatalf("the api's log does not say the cause (%s):\n%s", cause, log.String())
	}
}
