package connect_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	connectrpc "connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// withEverything is an api with Connect reaching server-everything, alice's
// token and her Connectors client.
func withEverything(t *testing.T) (*everything, *apitest.API, string, controlv1connect.ConnectorsClient) {
	ev := startEverything(t)
	a := apitest.New(t, apitest.WithConnect(ev.Upstream()))
	token := string(a.PersonalToken(a.User.ID))
	return ev, a, token, connectors(a, token)
}

func connectors(a *apitest.API, token string) controlv1connect.ConnectorsClient {
	return controlv1connect.NewConnectorsClient(http.DefaultClient, a.URL, connectrpc.WithGRPC(),
		connectrpc.WithInterceptors(client.BearerInterceptor(token)))
}

// door opens an MCP session on the mode B door with the official Go SDK's
// client.
func door(t *testing.T, a *apitest.API, token string) *sdk.ClientSession {
	t.Helper()
	cl := sdk.NewClient(&sdk.Implementation{Name: "connect-test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: a.URL + connect.DoorPath,
		HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP client on the door: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list on the door: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func text(r *sdk.CallToolResult) string {
	if r == nil { // a call that ended in an error
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Issue 44, Deliver 1, 3 and 5 (must show): the official Go MCP SDK's
// client on the mode B door lists and calls the tools of
// @modelcontextprotocol/server-everything, connected as a custom server
// with a header key through Connectors.ConnectCustom. The api reaches it
// under a public name only through its resolver; every request the
// server got carried the key; policy off takes a tool off the door, and
// ListConnectors shows the policies; a disconnect leaves no tool.
func TestModeBDoorListsAndCallsACustomServersToolsWithItsKey(t *testing.T) {
	ev, a, token, svc := withEverything(t)
	ctx := context.Background()

	got, err := svc.ConnectCustom(ctx, connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
		Name: "everything", Url: ev.URL, Header: ev.Header, Key: ev.Key}))
	if err != nil {
		t.Fatalf("ConnectCustom: %v", err)
	}
	c := got.Msg.GetConnector()
	if c.GetId() != "everything" || c.GetHeader() != ev.Header || len(c.GetTools()) == 0 {
		t.Fatalf("the connector as answered: %v", c)
	}
	if strings.Contains(got.Msg.String(), ev.Key) {
		t.Fatal("ConnectCustom answered the key")
	}
	var sealed []byte
	if err := a.DB.Pool.QueryRow(ctx, "SELECT secret_sealed FROM connect_grants WHERE connector = 'everything'").Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), ev.Key) {
		t.Fatal("the key is in connect_grants in the clear")
	}

	cs := door(t, a, token)
	names := toolNames(t, cs)
	if !slices.Contains(names, "everything__echo") || !slices.Contains(names, "everything__get-sum") {
		t.Fatalf("tools on the door: %v, want everything__echo and everything__get-sum", names)
	}
	before := ev.keyed.Load()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "through the door"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "through the door") {
		t.Fatalf("everything__echo: %v %v %q", err, res, text(res))
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 20, "b": 22}})
	if err != nil || res.IsError || !strings.Contains(text(res), "42") {
		t.Fatalf("everything__get-sum 20 22: %v %v %q", err, res, text(res))
	}
	if ev.keyed.Load() == before {
		t.Fatal("the calls did not reach the server with the key")
	}

	if _, err := svc.SetPolicy(ctx, connectrpc.NewRequest(&controlv1.SetPolicyRequest{Connector: "everything", Tool: "echo",
		Policy: controlv1.Policy_POLICY_OFF})); err != nil {
		t.Fatalf("SetPolicy echo off: %v", err)
	}
	if names := toolNames(t, cs); slices.Contains(names, "everything__echo") || !slices.Contains(names, "everything__get-sum") {
		t.Fatalf("tools with echo off: %v", names)
	}
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "x"}}); err == nil && !res.IsError {
		t.Fatalf("everything__echo off answered %q", text(res))
	}
	if _, err := svc.SetPolicy(ctx, connectrpc.NewRequest(&controlv1.SetPolicyRequest{Connector: "everything", Tool: "get-sum",
		Policy: controlv1.Policy_POLICY_ASK})); err != nil {
		t.Fatalf("SetPolicy get-sum ask: %v", err)
	}
	list, err := svc.ListConnectors(ctx, connectrpc.NewRequest(&controlv1.ListConnectorsRequest{}))
	if err != nil || len(list.Msg.GetConnectors()) != 1 {
		t.Fatalf("ListConnectors: %v %v", err, list)
	}
	policies := map[string]controlv1.Policy{}
	for _, tl := range list.Msg.GetConnectors()[0].GetTools() {
		policies[tl.GetName()] = tl.GetPolicy()
	}
	if policies["echo"] != controlv1.Policy_POLICY_OFF || policies["get-sum"] != controlv1.Policy_POLICY_ASK {
		t.Fatalf("policies listed: %v", policies)
	}
	chk, err := svc.CheckConnector(ctx, connectrpc.NewRequest(&controlv1.CheckConnectorRequest{Connector: "everything"}))
	if err != nil || chk.Msg.GetAccount() == "" {
		t.Fatalf("CheckConnector: %v %v", err, chk)
	}

	if _, err := svc.Disconnect(ctx, connectrpc.NewRequest(&controlv1.DisconnectRequest{Connector: "everything"})); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	if names := toolNames(t, cs); len(names) != 0 {
		t.Fatalf("tools after the disconnect: %v", names)
	}
	if _, err := svc.Disconnect(ctx, connectrpc.NewRequest(&controlv1.DisconnectRequest{Connector: "everything"})); connectrpc.CodeOf(err) != connectrpc.CodeNotFound {
		t.Fatalf("a second Disconnect: %v, want NOT_FOUND", err)
	}
}

// Issue 44, Deliver 3: the door takes the user's own token only; without
// one, with an unknown one or with an agent's cba_ it answers 401 with no
// body, and an invite-scoped cbit_ never reaches it.
func TestDoorRefusesEveryOtherBearer(t *testing.T) {
	a := apitest.New(t, apitest.WithConnect(connect.UpstreamConfig{}))
	for _, tc := range []struct{ name, header string }{
		{"none", ""},
		{"unknown personal", "Bearer cb_" + strings.Repeat("0", 64)},
		{"agent", "Bearer cba_" + strings.Repeat("1", 64)},
		{"basic", "Basic YWxpY2U6eA=="},
	} {
		req, _ := http.NewRequest("POST", a.URL+connect.DoorPath, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(body) != 0 {
			t.Errorf("%s: %d %q, want 401 with no body", tc.name, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest("POST", a.URL+connect.DoorPath, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer cbit_"+strings.Repeat("2", 64))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		t.Errorf("an invite-scoped token: %d", resp.StatusCode)
	}
}

// Issue 44, Deliver 5: a custom URL reaches no address that is not
// public: loopback by address or by a name resolving there, the other
// non-public ranges; the resolver the api was given sends only its one
// name. Bad input names its field. Nothing is stored.
func TestConnectCustomRefusesNonPublicAddressesAndBadInput(t *testing.T) {
	ev := startEverything(t)
	a := apitest.New(t, apitest.WithConnect(ev.Upstream()))
	svc := connectors(a, string(a.PersonalToken(a.User.ID)))
	_, port, _ := strings.Cut(ev.Addr, ":")
	for _, u := range []string{"https://127.0.0.1:" + port + "/mcp", "https://localhost:" + port + "/mcp",
		"https://[::1]:" + port + "/mcp", "https://10.0.0.1/mcp", "https://169.254.169.254/mcp", "https://100.64.0.1/mcp"} {
		_, err := svc.ConnectCustom(context.Background(), connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
			Name: "local", Url: u, Header: ev.Header, Key: ev.Key}))
		if connectrpc.CodeOf(err) != connectrpc.CodeFailedPrecondition || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v, want FAILED_PRECONDITION naming the refusal", u, err)
		}
	}
	for _, tc := range []struct {
		req   *controlv1.ConnectCustomRequest
		field string
	}{
		{&controlv1.ConnectCustomRequest{Name: "Bad", Url: ev.URL, Key: "k"}, "name"},
		{&controlv1.ConnectCustomRequest{Name: "github", Url: ev.URL, Key: "k"}, "name"},
		{&controlv1.ConnectCustomRequest{Name: "plain", Url: "http://" + publicName + "/mcp", Key: "k"}, "url"},
		{&controlv1.ConnectCustomRequest{Name: "nokey", Url: ev.URL}, "key"},
		{&controlv1.ConnectCustomRequest{Name: "crlf", Url: ev.URL, Key: "a\r\nb"}, "key"},
		{&controlv1.ConnectCustomRequest{Name: "hdr", Url: ev.URL, Header: "Bad Header", Key: "k"}, "header"},
	} {
		_, err := svc.ConnectCustom(context.Background(), connectrpc.NewRequest(tc.req))
		if connectrpc.CodeOf(err) != connectrpc.CodeInvalidArgument || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%v: %v, want INVALID_ARGUMENT naming %s", tc.req, err, tc.field)
		}
	}
	// The right name with a wrong key: the server refuses, nothing stored.
	_, err := svc.ConnectCustom(context.Background(), connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
		Name: "wrongkey", Url: ev.URL, Header: ev.Header, Key: "not-the-key"}))
	if connectrpc.CodeOf(err) != connectrpc.CodeFailedPrecondition {
		t.Errorf("a wrong key: %v, want FAILED_PRECONDITION", err)
	}
	var n int
	if err := a.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM connect_grants").Scan(&n); err != nil || n != 0 {
		t.Fatalf("grants stored after refusals: %d %v", n, err)
	}
}

// Issue 44, Deliver 1: a grant's sealed secrets are bound to their row
// (additional data connect_grants|<id>|<user>|<connector>): another
// grant's blob moved into it does not open, and the check says so
// without reaching the server.
func TestASealedGrantOpensOnlyInItsOwnRow(t *testing.T) {
	ev := startEverything(t)
	a := apitest.New(t, apitest.WithConnect(ev.Upstream()))
	svc := connectors(a, string(a.PersonalToken(a.User.ID)))
	ctx := context.Background()
	for _, name := range []string{"one", "two"} {
		if _, err := svc.ConnectCustom(ctx, connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
			Name: name, Url: ev.URL, Header: ev.Header, Key: ev.Key})); err != nil {
			t.Fatalf("ConnectCustom %s: %v", name, err)
		}
	}
	if _, err := a.DB.Pool.Exec(ctx, `UPDATE connect_grants SET secret_sealed = (SELECT secret_sealed FROM connect_grants WHERE connector = 'one')
		WHERE connector = 'two'`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CheckConnector(ctx, connectrpc.NewRequest(&controlv1.CheckConnectorRequest{Connector: "one"})); err != nil {
		t.Fatalf("check of the untouched grant: %v", err)
	}
	before := ev.keyed.Load()
	if _, err := svc.CheckConnector(ctx, connectrpc.NewRequest(&controlv1.CheckConnectorRequest{Connector: "two"})); err == nil {
		t.Fatal("a grant holding another row's sealed secrets opened")
	}
	if ev.keyed.Load() != before {
		t.Fatal("the moved secrets reached the server")
	}
}

// Issue 44, Deliver 3: a call of an ask tool waits, listed in GET
// /cb/api/connect, until the user answers in the console: once lets it
// through, deny answers a tool error without reaching the server, always
// lets it through and sets the tool's policy to allow. Another user cannot
// answer it.
func TestAnAskToolWaitsForTheUsersAnswer(t *testing.T) {
	ev, a, svc, cs := withEchoOnAsk(t)
	ctx := context.Background()
	a.AddUser("bob", false)
	bob := a.SignIn("bob")

	for _, tc := range []struct {
		decision string
		through  bool
	}{{"once", true}, {"deny", false}, {"always", true}} {
		type result struct {
			res *sdk.CallToolResult
			err error
		}
		done := make(chan result, 1)
		before := ev.keyed.Load()
		go func() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": tc.decision}})
			done <- result{res, err}
		}()
		id := waitApproval(t, a)
		if ev.keyed.Load() != before {
			t.Fatalf("%s: the call reached the server before its approval", tc.decision)
		}
		if resp, body := bob.Send("POST", "/cb/api/connect/approvals/"+id+"/answer", "application/json", `{"decision":"once"}`); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another user's answer: %d %s, want 404", resp.StatusCode, body)
		}
		if resp, body := a.Session.Send("POST", "/cb/api/connect/approvals/"+id+"/answer", "application/json", `{"decision":"`+tc.decision+`"}`); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("answer %s: %d %s", tc.decision, resp.StatusCode, body)
		}
		var r result
		select {
		case r = <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the call did not end within 60 s of the answer", tc.decision)
		}
		if tc.through && (r.err != nil || r.res.IsError || !strings.Contains(text(r.res), tc.decision)) {
			t.Fatalf("%s: %v %v %q, want the echo", tc.decision, r.err, r.res, text(r.res))
		}
		if !tc.through && (r.err != nil || !r.res.IsError || ev.keyed.Load() != before) {
			t.Fatalf("%s: %v %v, want a tool error and no call of the server", tc.decision, r.err, r.res)
		}
	}
	list, err := svc.ListConnectors(ctx, connectrpc.NewRequest(&controlv1.ListConnectorsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Msg.GetConnectors()[0].GetTools() {
		if tl.GetName() == "echo" && tl.GetPolicy() != controlv1.Policy_POLICY_ALLOW {
			t.Fatalf("echo's policy after always: %v", tl.GetPolicy())
		}
	}
	if resp, body := a.Session.Send("POST", "/cb/api/connect/approvals/nope/answer", "application/json", `{"decision":"maybe"}`); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "decision") {
		t.Fatalf("a bad decision: %d %s, want 400 naming decision", resp.StatusCode, body)
	}
}

// withEchoOnAsk is withEverything with server-everything connected as
// everything, its echo on ask, and an MCP session on the door.
func withEchoOnAsk(t *testing.T) (*everything, *apitest.API, controlv1connect.ConnectorsClient, *sdk.ClientSession) {
	ev, a, token, svc := withEverything(t)
	ctx := context.Background()
	if _, err := svc.ConnectCustom(ctx, connectrpc.NewRequest(&controlv1.ConnectCustomRequest{
		Name: "everything", Url: ev.URL, Header: ev.Header, Key: ev.Key})); err != nil {
		t.Fatalf("ConnectCustom: %v", err)
	}
	if _, err := svc.SetPolicy(ctx, connectrpc.NewRequest(&controlv1.SetPolicyRequest{Connector: "everything", Tool: "echo",
		Policy: controlv1.Policy_POLICY_ASK})); err != nil {
		t.Fatalf("SetPolicy echo ask: %v", err)
	}
	return ev, a, svc, door(t, a, token)
}

// waitApproval waits until GET /cb/api/connect lists one pending approval
// and answers its id.
func waitApproval(t *testing.T, a *apitest.API) string {
	t.Helper()
	var id string
	wait.Eventually(t, 60*time.Second, "a pending approval of echo", func() (bool, string) {
		resp, body := a.Session.Send("GET", "/cb/api/connect", "", "")
		var got struct {
			Approvals []struct {
				ID   string `json:"id"`
				Tool string `json:"tool"`
			} `json:"approvals"`
		}
		if resp.StatusCode == http.StatusOK && json.Unmarshal([]byte(body), &got) == nil && len(got.Approvals) == 1 && got.Approvals[0].Tool == "echo" {
			id = got.Approvals[0].ID
			return true, ""
		}
		return false, "GET /cb/api/connect answered " + body
	})
	return id
}

// Issue 44, Deliver 3: a disconnect ends the door calls open on the
// connector: a call waiting for its approval ends at once with a tool
// error that says so, and its approval is no longer pending.
func TestADisconnectEndsTheOpenDoorCalls(t *testing.T) {
	_, a, svc, cs := withEchoOnAsk(t)
	ctx := context.Background()
	type result struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "open"}})
		done <- result{res, err}
	}()
	waitApproval(t, a)
	if _, err := svc.Disconnect(ctx, connectrpc.NewRequest(&controlv1.DisconnectRequest{Connector: "everything"})); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	select {
	case r := <-done:
		if r.err != nil || !r.res.IsError || !strings.Contains(text(r.res), "disconnected") {
			t.Fatalf("the open call: %v %v %q, want a tool error saying the connector was disconnected", r.err, r.res, text(r.res))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the open call did not end within 60 s of the disconnect")
	}
	if resp, body := a.Session.Send("GET", "/cb/api/connect", "", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"approvals":[]`) {
		t.Fatalf("GET /cb/api/connect after the disconnect: %d %s, want no approval pending", resp.StatusCode, body)
	}
}

// Issue 44, Deliver 3: a door call ends with the token it came with: a
// call waiting for its approval ends once the personal token it carried
// is replaced (Contract: Browser sign-in and device tokens, "Every call
// still open on a revoked or replaced token (... a Connect door call)
// ends with it").
func TestAReplacedTokenEndsItsOpenDoorCall(t *testing.T) {
	_, a, _, cs := withEchoOnAsk(t)
	done := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "open"}})
		if err == nil && !res.IsError {
			err = errors.New("the call went through: " + text(res))
		}
		done <- err
	}()
	waitApproval(t, a)
	a.PersonalToken(a.User.ID) // a new one: the old one is revoked
	select {
	case err := <-done:
		if err != nil && strings.Contains(err.Error(), "went through") {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the open call did not end within 60 s of its token's replacement")
	}
}
