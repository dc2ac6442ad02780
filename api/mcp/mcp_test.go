package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is the control MCP on a real listener, the real token index on a
// fresh database with users alice and bob (personal tokens), and the
// boxes service in memory.
type env struct {
	t          testing.TB
	base, url  string // the listener's URL, the MCP's
	boxes      *fakeBoxes
	tokens     *tokens.Store
	alice, bob users.User
	aliceToken tokens.Secret
	bobToken   tokens.Secret
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := dbtest.New(t, users.Schema)
	us := users.NewStore(db.Pool)
	us.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	ix := tokens.NewIndex(db.Pool, db.URL, log)
	if err := ix.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Stop)
	e := &env{t: t, boxes: newFakeBoxes(), tokens: tokens.NewStore(db.Pool, ix)}
	e.alice, e.aliceToken = e.user("alice", us)
	e.bob, e.bobToken = e.user("bob", us)

	srv := server.New(log, nil)
	srv.Handle(controlv1connect.NewBoxesHandler(e.boxes, connect.WithInterceptors(ix.Interceptor())))
	New(Deps{Boxes: e.boxes, Follow: e.boxes.follow, Tokens: ix, Hosts: []string{"api.example.test"}, Log: log}).Mount(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { srv.Serve(sctx, ln); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	e.base = "http://" + ln.Addr().String()
	e.url = e.base + Path
	return e
}

func (e *env) user(name string, us *users.Store) (users.User, tokens.Secret) {
	u, err := us.Add(context.Background(), name, "correct horse", false)
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := e.tokens.Regenerate(context.Background(), u.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return u, tok
}

// bearer adds the Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// client is one go-sdk client session and the progress notifications it got.
type client struct {
	*sdk.ClientSession
	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams
}

func (c *client) notes() []*sdk.ProgressNotificationParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*sdk.ProgressNotificationParams(nil), c.progress...)
}

// connect is a go-sdk client over streamable HTTP with token.
func (e *env) connect(token tokens.Secret) *client {
	e.t.Helper()
	c := &client{}
	cl := sdk.NewClient(&sdk.Implementation{Name: "mcp-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, r.Params)
			c.mu.Unlock()
		},
	})
	tr := &sdk.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: bearer{string(token)}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { cs.Close() })
	c.ClientSession = cs
	return c
}

// call calls tool with args, failing on a protocol error.
func (c *client) call(t *testing.T, tool string, args map[string]any, progress ...any) *sdk.CallToolResult {
	t.Helper()
	res, err := c.try(tool, args, progress...)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res
}

func (c *client) try(tool string, args map[string]any, progress ...any) (*sdk.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &sdk.CallToolParams{Name: tool, Arguments: args}
	if len(progress) > 0 {
		p.SetProgressToken(progress[0])
	}
	return c.CallTool(ctx, p)
}

// ok checks res is a success whose structuredContent matches the tool's
// published output schema and whose one text block is the same JSON, and
// answers it.
func (c *client) ok(t *testing.T, tool string, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: isError: %s", tool, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.outputSchema(t, tool).Validate(got); err != nil {
		t.Fatalf("%s: structuredContent %s does not match the output schema: %v", tool, raw, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want one text block", tool, len(res.Content))
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Fatalf("%s: text block is not JSON: %v", tool, err)
	}
	if a, b := canon(t, fromText), canon(t, got); a != b {
		t.Fatalf("%s: text block %s is not structuredContent %s", tool, a, b)
	}
	return got
}

// refused checks res is isError with one text block and no
// structuredContent, and answers the text.
func refused(t *testing.T, what string, res *sdk.CallToolResult, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: a protocol error, want isError: %v", what, err)
	}
	if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
		t.Fatalf("%s: want isError with one text block and no structuredContent, got isError=%v %d blocks, %v", what, res.IsError, len(res.Content), res.StructuredContent)
	}
	return text(res)
}

// code is the JSON-RPC error code of err (0 when it is none).
func code(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

func (c *client) outputSchema(t *testing.T, tool string) *jsonschema.Resolved {
	t.Helper()
	list, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Name == tool {
			var s jsonschema.Schema
			raw, _ := json.Marshal(tl.OutputSchema)
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			r, err := s.Resolve(nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("tools/list has no %s", tool)
	return nil
}

func text(res *sdk.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); ok {
		return tc.Text
	}
	return ""
}

// canon is v as JSON with sorted keys.
func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitFor polls cond until it holds or 10 s pass, then fails naming what.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
