package connect_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	connectrpc "connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/connect"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// auditColumns are connect_audit's columns, the contract's in its order
// (Contract: Connect, Audit) after the row's id.
var auditColumns = []string{"id", "at", "user_id", "connector", "tool", "door", "caller", "decision", "outcome",
	"upstream_status", "latency_ms", "request_bytes", "response_bytes", "arguments_hmac"}

// waitAuditRow waits for the one audit row of a call ended by its
// client (written as its handler returns) and answers it.
func waitAuditRow(t *testing.T, a *apitest.API) auditRow {
	t.Helper()
	var row auditRow
	wait.Eventually(t, 60*time.Second, "the call's audit row", func() (bool, string) {
		got := auditRows(t, a)
		if len(got) != 1 {
			return false, fmt.Sprintf("rows %v", got)
		}
		return json.Unmarshal([]byte(got[0]), &row) == nil, got[0]
	})
	return row
}

// connectEverything connects ev as the custom server everything.
func connectEverything(t *testing.T, svc controlv1connect.ConnectorsClient, ev *everything) {
	t.Helper()
	if _, err := svc.ConnectCustom(context.Background(), connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
		Name: "everything", Url: ev.URL, Header: ev.Header, Key: ev.Key})); err != nil {
		t.Fatalf("ConnectCustom: %v", err)
	}
}

// auditRows answers every connect_audit row as its JSON text, oldest
// first.
func auditRows(t *testing.T, a *apitest.API) []string {
	t.Helper()
	rows, err := a.DB.Pool.Query(context.Background(), "SELECT row_to_json(a)::text FROM connect_audit a ORDER BY id")
	if err != nil {
		t.Fatalf("connect_audit: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// auditRow is a connect_audit row as row_to_json writes it.
type auditRow struct {
	UserID         string  `json:"user_id"`
	Connector      string  `json:"connector"`
	Tool           string  `json:"tool"`
	Door           string  `json:"door"`
	Caller         string  `json:"caller"`
	Decision       string  `json:"decision"`
	Outcome        string  `json:"outcome"`
	UpstreamStatus *int    `json:"upstream_status"`
	LatencyMS      int64   `json:"latency_ms"`
	RequestBytes   int64   `json:"request_bytes"`
	ResponseBytes  int64   `json:"response_bytes"`
	ArgumentsHMAC  *string `json:"arguments_hmac"`
}

// noSecretIn fails t when row carries secret, as text or as the hex a
// bytea is written in.
func noSecretIn(t *testing.T, row string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(row, s) || strings.Contains(row, hex.EncodeToString([]byte(s))) {
			t.Fatalf("the audit row carries %q: %s", s, row)
		}
	}
}

// Issue 44, Deliver 2 (must show: audit rows without arguments): a door
// call writes one connect_audit row with the contract's columns, the
// caller its clientInfo.name, the server's status, the sizes and a keyed
// hash of the arguments, and neither the arguments, the result nor the
// key; a disconnect writes its own row.
func TestADoorCallIsAuditedWithoutItsArgumentsOrResult(t *testing.T) {
	ev, a, token, svc := withEverything(t)
	ctx := context.Background()
	connectEverything(t, svc, ev)
	var cols []string
	rows, err := a.DB.Pool.Query(ctx, "SELECT column_name FROM information_schema.columns WHERE table_name = 'connect_audit' ORDER BY ordinal_position")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if !slices.Equal(cols, auditColumns) {
		t.Fatalf("connect_audit's columns: %v, want %v", cols, auditColumns)
	}

	const secret = "pw-7f3a9c-never-in-the-audit"
	res, err := door(t, a, token).CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": secret}})
	if err != nil || res.IsError || !strings.Contains(text(res), secret) {
		t.Fatalf("everything__echo: %v %v %q", err, res, text(res))
	}
	got := auditRows(t, a)
	if len(got) != 1 {
		t.Fatalf("connect_audit after one door call: %d rows %v, want 1", len(got), got)
	}
	noSecretIn(t, got[0], secret, ev.Key, text(res))
	var row auditRow
	if err := json.Unmarshal([]byte(got[0]), &row); err != nil {
		t.Fatal(err)
	}
	argsJSON, _ := json.Marshal(map[string]any{"message": secret})
	if row.UserID != a.User.ID || row.Connector != "everything" || row.Tool != "echo" || row.Door != "mcp" ||
		row.Caller != "mcp:connect-test" || row.Decision != "allow" || row.Outcome != "ok" ||
		row.UpstreamStatus == nil || *row.UpstreamStatus != http.StatusOK || row.LatencyMS < 0 ||
		row.RequestBytes != int64(len(argsJSON)) || row.ResponseBytes <= int64(len(secret)) ||
		row.ArgumentsHMAC == nil || len(*row.ArgumentsHMAC) != len(`\x`)+64 {
		t.Fatalf("the door call's audit row: %s", got[0])
	}

	if _, err := svc.Disconnect(ctx, connectrpc.NewRequest(&controlv1.DisconnectRequest{Connector: "everything"})); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	got = auditRows(t, a)
	if len(got) != 2 {
		t.Fatalf("connect_audit after the disconnect: %v, want 2 rows", got)
	}
	row = auditRow{}
	if err := json.Unmarshal([]byte(got[1]), &row); err != nil {
		t.Fatal(err)
	}
	if row.Connector != "everything" || row.Tool != "" || row.Door != "app" || row.Caller != "app" || row.Decision != "disconnect" ||
		row.Outcome != "ok" || row.UpstreamStatus != nil || row.ArgumentsHMAC != nil {
		t.Fatalf("the disconnect's audit row: %s", got[1])
	}
}

// Issue 44, Deliver 2: a call of an ask tool the user denies is audited
// as denied, an error, the server never reached, without its arguments.
func TestADeniedCallIsAudited(t *testing.T) {
	_, a, _, cs := withEchoOnAsk(t)
	const secret = "pw-denied-5e1b-never-in-the-audit"
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": secret}})
		if err != nil {
			res = nil
		}
		done <- res
	}()
	id := waitApproval(t, a)
	if resp, body := a.Session.Send("POST", "/cb/api/connect/approvals/"+id+"/answer", "application/json", `{"decision":"deny"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("deny: %d %s", resp.StatusCode, body)
	}
	select {
	case res := <-done:
		if res == nil || !res.IsError {
			t.Fatalf("the denied call answered %v", res)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the denied call did not end within 60 s")
	}
	got := auditRows(t, a)
	if len(got) != 1 {
		t.Fatalf("connect_audit after a denied call: %v, want 1 row", got)
	}
	noSecretIn(t, got[0], secret)
	var row auditRow
	if err := json.Unmarshal([]byte(got[0]), &row); err != nil {
		t.Fatal(err)
	}
	if row.Tool != "echo" || row.Decision != "denied" || row.Outcome != "error" || row.UpstreamStatus != nil || row.ArgumentsHMAC == nil {
		t.Fatalf("the denied call's audit row: %s", got[0])
	}
}

// Issue 44, Deliver 2: connect_audit keeps 90 days by the api's clock
// (apiserver.Options.Now): with the clock 91 days past a call and 31
// past another, the sweep removes the first and keeps the second.
func TestTheAuditSweepKeeps90DaysByTheApisClock(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	ev := startEverything(t)
	a := apitest.New(t, apitest.WithConnect(ev.Upstream()), apitest.WithClock(now))
	token := string(a.PersonalToken(a.User.ID))
	ctx := context.Background()
	connectEverything(t, connectors(a, token), ev)
	cs := door(t, a, token)
	call := func(msg string) {
		t.Helper()
		if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": msg}}); err != nil || res.IsError {
			t.Fatalf("everything__echo %s: %v %v", msg, err, res)
		}
	}
	call("old")
	skew.Add(int64(60 * 24 * time.Hour))
	call("new")
	if n, err := a.Connect.SweepAudit(ctx); err != nil || n != 0 {
		t.Fatalf("the sweep 60 days on: %d rows, %v; want none removed", n, err)
	}
	skew.Add(int64(31 * 24 * time.Hour))
	if n, err := a.Connect.SweepAudit(ctx); err != nil || n != 1 {
		t.Fatalf("the sweep 91 days on: %d rows, %v; want 1 removed", n, err)
	}
	var left []time.Time
	rows, err := a.DB.Pool.Query(ctx, "SELECT at FROM connect_audit")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		left = append(left, at)
	}
	if len(left) != 1 || now().Sub(left[0]) > 32*24*time.Hour || now().Sub(left[0]) < 30*24*time.Hour {
		t.Fatalf("connect_audit after the sweep at %v: %v, want the row of 31 days ago", now(), left)
	}
}

// activity is GET /cb/api/connect/activity as b sees it.
func activity(t *testing.T, b *apitest.Browser, query string) []connect.Activity {
	t.Helper()
	resp, body := b.Send("GET", "/cb/api/connect/activity"+query, "", "")
	var got struct{ Activity []connect.Activity }
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("GET /cb/api/connect/activity%s: %d %s", query, resp.StatusCode, body)
	}
	return got.Activity
}

// Issue 44, Deliver 2 (Contract: Connect, Console calls): GET
// /cb/api/connect/activity lists the caller's own rows alone, newest
// first, ?connector= keeps one connector's; a bad connector is 400.
func TestActivityListsOnlyTheCallersRows(t *testing.T) {
	ev, a, token, svc := withEverything(t)
	ctx := context.Background()
	bob := a.AddUser("bob", false)
	bobToken := string(a.PersonalToken(bob.ID))
	for _, who := range []struct {
		svc   controlv1connect.ConnectorsClient
		token string
		name  string
	}{{svc, token, "everything"}, {connectors(a, bobToken), bobToken, "bobs"}} {
		if _, err := who.svc.ConnectCustom(ctx, connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
			Name: who.name, Url: ev.URL, Header: ev.Header, Key: ev.Key})); err != nil {
			t.Fatalf("ConnectCustom %s: %v", who.name, err)
		}
		if res, err := door(t, a, who.token).CallTool(ctx, &sdk.CallToolParams{Name: who.name + "__echo",
			Arguments: map[string]any{"message": "hi"}}); err != nil || res.IsError {
			t.Fatalf("%s__echo: %v %v", who.name, err, res)
		}
	}
	if _, err := svc.Disconnect(ctx, connectrpc.NewRequest(&controlv1.DisconnectRequest{Connector: "everything"})); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}

	mine := activity(t, a.Session, "")
	if len(mine) != 2 || mine[0].Decision != "disconnect" || mine[1].Tool != "echo" || mine[1].Connector != "everything" {
		t.Fatalf("alice's activity: %+v, want her disconnect and her call, newest first", mine)
	}
	if got := activity(t, a.Session, "?connector=bobs"); len(got) != 0 {
		t.Fatalf("alice's activity of bob's connector: %+v", got)
	}
	bobs := activity(t, a.SignIn("bob"), "")
	if len(bobs) != 1 || bobs[0].Connector != "bobs" {
		t.Fatalf("bob's activity: %+v, want his one call", bobs)
	}
	if resp, body := a.Session.Send("GET", "/cb/api/connect/activity?connector=Not_An_Id", "", ""); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "connector") {
		t.Fatalf("activity of a bad connector id: %d %s, want 400 naming connector", resp.StatusCode, body)
	}
}

// Issue 44, Deliver 2 (Contract: Connect, Audit: off, needs_reconnect):
// a tool left off the door is still refused and audited when a client
// calls it by name: one whose policy is off as off, one of a connector
// that needs reconnecting as needs_reconnect; neither reaches the
// server, and neither row carries the arguments.
func TestACallOfAToolOffTheDoorIsAudited(t *testing.T) {
	ev, a, token, svc := withEverything(t)
	ctx := context.Background()
	connectEverything(t, svc, ev)
	if _, err := svc.SetPolicy(ctx, connectrpc.NewRequest(&controlv1.SetPolicyRequest{Connector: "everything", Tool: "echo",
		Policy: controlv1.Policy_POLICY_OFF})); err != nil {
		t.Fatalf("SetPolicy echo off: %v", err)
	}
	const secret = "pw-off-81c2-never-in-the-audit"
	before := ev.keyed.Load()
	res, err := door(t, a, token).CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": secret}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "off") {
		t.Fatalf("everything__echo off: %v %+v, want a tool error saying off", err, res)
	}
	if _, err := a.DB.Pool.Exec(ctx, "UPDATE connect_grants SET needs_reconnect = true"); err != nil {
		t.Fatal(err)
	}
	res, err = door(t, a, token).CallTool(ctx, &sdk.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "reconnect") {
		t.Fatalf("everything__get-sum needing reconnect: %v %+v, want a tool error saying reconnect", err, res)
	}
	if ev.keyed.Load() != before {
		t.Fatal("a call of a tool off the door reached the server")
	}
	got := auditRows(t, a)
	if len(got) != 2 {
		t.Fatalf("connect_audit: %v, want 2 rows", got)
	}
	for i, want := range []struct{ tool, decision string }{{"echo", "off"}, {"get-sum", "needs_reconnect"}} {
		noSecretIn(t, got[i], secret)
		var row auditRow
		if err := json.Unmarshal([]byte(got[i]), &row); err != nil {
			t.Fatal(err)
		}
		if row.Tool != want.tool || row.Decision != want.decision || row.Outcome != "error" || row.Caller != "mcp:connect-test" ||
			row.UpstreamStatus != nil || row.ArgumentsHMAC == nil {
			t.Fatalf("the audit row of %s: %s, want %s", want.tool, got[i], want.decision)
		}
	}
}

// Issue 44, Deliver 2 (Contract: Connect, Audit: outcome_unknown): a
// call whose client goes away while the server holds it is audited as
// outcome_unknown: whether the server acted is not known.
func TestACallEndedWhileTheServerHoldsItIsOutcomeUnknown(t *testing.T) {
	ev, a, token, svc := withEverything(t)
	connectEverything(t, svc, ev)
	cs := door(t, a, token)
	before := ev.keyed.Load()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__trigger-long-running-operation",
			Arguments: map[string]any{"duration": 600, "steps": 1}})
		ended <- err
	}()
	// initialize, notifications/initialized, tools/call.
	wait.Eventually(t, 60*time.Second, "the call at the server", func() (bool, string) {
		n := ev.keyed.Load() - before
		return n >= 3, fmt.Sprintf("%d keyed requests at the server", n)
	})
	cancel()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the call ended by its client answered")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end within 60 s of its client going away")
	}
	row := waitAuditRow(t, a)
	if row.Tool != "trigger-long-running-operation" || row.Decision != "allow" || row.Outcome != "outcome_unknown" {
		t.Fatalf("the audit row of a call ended at the server: %+v, want allow, outcome_unknown", row)
	}
}

// Issue 44, Deliver 2 (Contract: Connect, Audit: approval_required): a
// call of an ask tool whose client goes away before the user answers is
// audited as approval_required, not as denied, the server never reached.
func TestACallLeftUnapprovedIsAuditedApprovalRequired(t *testing.T) {
	ev, a, _, cs := withEchoOnAsk(t)
	before := ev.keyed.Load()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "waiting"}})
		ended <- err
	}()
	waitApproval(t, a)
	cancel()
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end within 60 s of its client going away")
	}
	row := waitAuditRow(t, a)
	if row.Tool != "echo" || row.Decision != "approval_required" || row.Outcome != "error" || row.UpstreamStatus != nil {
		t.Fatalf("the audit row of a call left unapproved: %+v, want approval_required, error, no upstream status", row)
	}
	if ev.keyed.Load() != before {
		t.Fatal("a call left unapproved reached the server")
	}
}
