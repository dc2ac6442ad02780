package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/mcp"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// post sends one JSON-RPC body to the MCP with token (none when empty)
// and session id, as a client of the streamable HTTP transport does.
func (e *env) post(t *testing.T, token tokens.Secret, session, host, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+string(token))
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// session initializes a session by hand and answers its id.
func (e *env) session(t *testing.T, token tokens.Secret) string {
	t.Helper()
	resp := e.post(t, token, "", "", initialize)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %s", resp.Status)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatal("initialize answered no Mcp-Session-Id")
	}
	reply(t, resp)
	if r := e.post(t, token, id, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s", r.Status)
	}
	return id
}

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	ID     any `json:"id"`
	Error  *struct{ Code int64 }
	Result json.RawMessage
}

// reply reads the JSON-RPC response of resp: the body, or the first data
// line of its event stream that answers a request.
func reply(t *testing.T, resp *http.Response) rpcReply {
	t.Helper()
	var r rpcReply
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatalf("%s: %v", resp.Status, err)
		}
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if err := json.Unmarshal([]byte(data), &r); err == nil && r.ID != nil {
			return r
		}
	}
	t.Fatalf("no response in the event stream: %v", sc.Err())
	return r
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A missing or bad bearer is 401 with the sdk middleware's one line; a
// cbit_ one is 403 invite_token, from the api's check around every route
// but the invites (Contract: Invite-scoped tokens); the personal token of
// another user cannot use a session (403).
func TestBearerIsRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		what   string
		token  tokens.Secret
		status int
		answer string
	}{
		{"no token", "", 401, "no bearer token\n"},
		{"a malformed token", "cb_nothex", 401, "invalid token: " + tokens.ErrMalformed.Error() + "\n"},
		{"an unknown token", "cb_" + tokens.Secret(strings.Repeat("0", 64)), 401, "invalid token: " + tokens.ErrUnknown.Error() + "\n"},
		{"an invite-scoped token", "cbit_" + tokens.Secret(strings.Repeat("0", 64)), 403,
			`{"error":"invite_token","message":"an invite-scoped token (cbit_) reaches only POST and GET /cb/api/invites"}` + "\n"},
	} {
		resp := e.post(t, tc.token, "", "", initialize)
		if got := body(t, resp); resp.StatusCode != tc.status || got != tc.answer {
			t.Errorf("%s: %s %q, want %d %q", tc.what, resp.Status, got, tc.status, tc.answer)
		}
	}
	id := e.session(t, e.aliceToken)
	if resp := e.post(t, e.bobToken, id, "", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice's session with bob's token: %s, want 403", resp.Status)
	}
	if r := reply(t, e.post(t, e.aliceToken, id, "", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)); r.Error != nil {
		t.Errorf("alice's session with her token: error %d", r.Error.Code)
	}
}

// An unknown method is -32601 (Contract: Control MCP, errors).
func TestUnknownMethodIsMethodNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.session(t, e.aliceToken)
	r := reply(t, e.post(t, e.aliceToken, id, "", `{"jsonrpc":"2.0","id":2,"method":"boxes/explode","params":{}}`))
	if r.Error == nil || r.Error.Code != -32601 {
		t.Fatalf("an unknown method: %+v, want -32601", r)
	}
	// initialize advertises logging, so its request is no unknown method
	// (it was answered -32601).
	if r := reply(t, e.post(t, e.aliceToken, id, "", `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}`)); r.Error != nil {
		t.Fatalf("logging/setLevel: %+v, want a result", r.Error)
	}
}

// A wrong Mcp-Session-Id is 404, so the client initializes again; a
// request without one that is not an initialize is 400 and starts nothing.
func TestSessionIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.session(t, e.aliceToken)
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"box_ensure","arguments":{}}}`
	if resp := e.post(t, e.aliceToken, "not-a-session", "", call); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a wrong Mcp-Session-Id: %s, want 404", resp.Status)
	}
	if resp := e.post(t, e.aliceToken, "", "", call); resp.StatusCode != http.StatusNotFound {
		t.Errorf("no Mcp-Session-Id: %s %q, want 404", resp.Status, body(t, resp))
	}
	if n := e.boxCount(e.alice); n != 0 {
		t.Fatalf("the calls without a session made %d boxes", n)
	}
}

// A body over MaxBody is 413 and runs nothing.
func TestBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.session(t, e.aliceToken)
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"box_create","arguments":{"name":"a","image":"` + strings.Repeat("x", mcp.MaxBody) + `"}}}`
	if resp := e.post(t, e.aliceToken, id, "", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of %d bytes: %s, want 413", len(big), resp.Status)
	}
	if n := e.boxCount(e.alice); n != 0 {
		t.Fatalf("the refused body made %d boxes", n)
	}
}

// On loopback, a Host that is neither localhost nor the api's own is 403
// (DNS rebinding); the configured host is served.
func TestForeignHostOnLoopbackIs403(t *testing.T) {
	t.Parallel()
	// The api's public origin is api.example.test, behind a proxy on loopback.
	e := newEnv(t, apitest.WithConfig(func(c *config.Config) { c.PublicURL = "https://api.example.test" }))
	if resp := e.post(t, e.aliceToken, "", "rebind.example.com", initialize); resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host rebind.example.com: %s, want 403", resp.Status)
	}
	if resp := e.post(t, e.aliceToken, "", "api.example.test", initialize); resp.StatusCode != http.StatusOK {
		t.Errorf("Host api.example.test (configured): %s, want 200", resp.Status)
	}
	if resp := e.post(t, e.aliceToken, "", "localhost:1", initialize); resp.StatusCode != http.StatusOK {
		t.Errorf("Host localhost: %s, want 200", resp.Status)
	}
}

// A revoked token ends its open exchanges: the call waiting on an
// operation ends, the session is gone, the token is 401; the operation
// itself runs on to its end.
func TestRevokedTokenEndsOpenExchanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.connect(e.aliceToken)
	release := e.sup.Hold()
	defer release() // a failure's end too, so the api can close
	ended := make(chan error, 1)
	go func() {
		_, err := c.Try(context.Background(), "box_create", map[string]any{"name": "dev"}, "p")
		ended <- err
	}()
	c.WaitNotes(t, 1) // box_create is waiting
	if err := e.api.Tokens.Revoke(context.Background(), e.alice.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err == nil {
		t.Fatal("box_create went on after its token was revoked")
	}
	if resp := e.post(t, e.aliceToken, "", "", initialize); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %s, want 401", resp.Status)
	}
	release()
	op := e.only(t, e.alice)
	if last, err := e.boxes().WaitOperation(context.Background(), e.alice.ID, op, func(*controlv1.Operation) {}); err != nil || last.Phase != controlv1.Phase_PHASE_DONE {
		t.Fatalf("the operation after its caller's token was revoked: %v %v", last, err)
	}
}

// messages are the JSON-RPC messages of resp's event stream, in order:
// "progress:MESSAGE" for a progress notification, "result" or
// "error:CODE" for the response, which ends it.
func messages(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var got []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			ID     any
			Method string
			Params struct{ Message string }
			Error  *struct{ Code int64 }
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		switch {
		case m.Method == "notifications/progress":
			got = append(got, "progress:"+m.Params.Message)
		case m.Error != nil:
			return append(got, fmt.Sprintf("error:%d", m.Error.Code))
		case m.ID != nil:
			return append(got, "result")
		}
	}
	t.Fatalf("the stream ended without a response after %q: %v", got, sc.Err())
	return nil
}

// On the wire, a call's progress notifications come in order ahead of
// its result, on the call's own stream; a call without a token gets the
// result alone (Contract: Control MCP, progress).
func TestProgressComesBeforeTheResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.session(t, e.aliceToken)
	call := func(args, meta string) []string {
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"box_create","arguments":` + args + meta + `}}`
		return messages(t, e.post(t, e.aliceToken, id, "", body))
	}
	if got := strings.Join(call(`{"name":"a"}`, `,"_meta":{"progressToken":"p"}`), " "); got != "progress:creating progress:done result" {
		t.Fatalf("box_create with a progress token: %s", got)
	}
	if got := strings.Join(call(`{"name":"b"}`, ""), " "); got != "result" {
		t.Fatalf("box_create without a progress token: %s", got)
	}
}

// A session's GET event stream outlived the revoked token that opened it:
// only the POST calls, and the session (with the token that initialized
// it), were bound to their token. Now the GET's request ends with its
// token: a session initialized with the personal token, its GET opened
// with a device token of the same user, and the device revoked.
func TestRevokedTokenEndsTheGETStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.session(t, e.aliceToken)
	device, sum := tokens.New()
	deviceID := "dev_0123456789abcdef"
	e.change(t, "INSERT INTO user_tokens (id, user_id, sha256, client, label) VALUES ($1, $2, $3, 'cocoonbox-cli', 'laptop')", deviceID, e.alice.ID, sum[:])
	req, _ := http.NewRequest(http.MethodGet, e.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+string(device))
	var resp *http.Response
	wait.Eventually(t, 30*time.Second, "the index taking the device token (its NOTIFY)", func() (bool, string) {
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			resp.Body.Close()
			return false, resp.Status
		}
		return true, ""
	})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with the device token: %s %q", resp.Status, body(t, resp))
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	e.change(t, "DELETE FROM user_tokens WHERE id = $1", deviceID)
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the GET stream is still open 30 s after its token was revoked")
	}
	// The session, on the personal token, lives on.
	if r := e.post(t, e.aliceToken, id, "", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); r.StatusCode != http.StatusOK {
		t.Fatalf("the session after the GET's token was revoked: %s", r.Status)
	}
}

// change runs one statement on the tokens and notifies every api of
// alice's change, as a sign-in or a revoke does.
func (e *env) change(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.api.DB.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return err
		}
		return users.Notify(ctx, tx, e.alice.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
}
