// Package mcptest is the control MCP's client for tests: the official
// go-sdk client over streamable HTTP with a bearer token, the progress
// notifications it got, and the checks every tool result must pass
// (Contract: Control MCP, results and errors). Package mcp's own tests and
// the tests of the real api (api/e2e/...) both use it.
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallTimeout bounds one tool call (a box's create and boot included).
const CallTimeout = 3 * time.Minute

// Client is one go-sdk client session and the progress notifications it got.
type Client struct {
	*sdk.ClientSession
	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams
	arrived  chan struct{} // closed and replaced at each notification

	outputsMu sync.Mutex
	outputs   map[string]*jsonschema.Resolved
}

// bearer adds the Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Connect initializes a session at url (…/cocoonbox.mcp/control) with
// token as its bearer; the session is closed when t ends.
func Connect(t testing.TB, url, token string) *Client {
	t.Helper()
	c := &Client{arrived: make(chan struct{})}
	cl := sdk.NewClient(&sdk.Implementation{Name: "mcptest", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, r.Params)
			close(c.arrived)
			c.arrived = make(chan struct{})
			c.mu.Unlock()
		},
	})
	tr := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.ClientSession = cs
	return c
}

// Notes are the progress notifications received so far, in order.
func (c *Client) Notes() []*sdk.ProgressNotificationParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*sdk.ProgressNotificationParams(nil), c.progress...)
}

// WaitNotes answers the progress notifications once there are at least n,
// failing after 30 s. The client handles notifications apart from the
// responses, so a tool's result can be read before the notifications that
// came ahead of it on the wire.
func (c *Client) WaitNotes(t testing.TB, n int) []*sdk.ProgressNotificationParams {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		got, arrived := append([]*sdk.ProgressNotificationParams(nil), c.progress...), c.arrived
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-arrived:
		case <-timeout:
			t.Fatalf("waited 30 s for %d progress notifications, got %d", n, len(got))
		}
	}
}

// Try calls tool with args (and a progress token when one is given).
func (c *Client) Try(ctx context.Context, tool string, args map[string]any, progress ...any) (*sdk.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	p := &sdk.CallToolParams{Name: tool, Arguments: args}
	if len(progress) > 0 {
		p.SetProgressToken(progress[0])
	}
	return c.CallTool(ctx, p)
}

// OK calls tool and checks its result is a success whose structuredContent
// matches the tool's published output schema and whose one text block is
// the same object as JSON; it answers that object.
func (c *Client) OK(t testing.TB, tool string, args map[string]any, progress ...any) map[string]any {
	t.Helper()
	res, err := c.Try(context.Background(), tool, args, progress...)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("%s %v: isError: %s", tool, args, Text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := c.output(t, tool).Validate(got); err != nil {
		t.Fatalf("%s: structuredContent %s does not match the output schema: %v", tool, raw, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want one text block", tool, len(res.Content))
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(Text(res)), &fromText); err != nil {
		t.Fatalf("%s: the text block is not JSON: %v", tool, err)
	}
	if a, b := Canon(t, fromText), Canon(t, got); a != b {
		t.Fatalf("%s: the text block %s is not structuredContent %s", tool, a, b)
	}
	return got
}

// Refused calls tool and checks its result is isError with one text block
// and no structuredContent; it answers the text.
func (c *Client) Refused(t testing.TB, what, tool string, args map[string]any) string {
	t.Helper()
	res, err := c.Try(context.Background(), tool, args)
	if err != nil {
		t.Fatalf("%s: a protocol error, want isError: %v", what, err)
	}
	if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
		t.Fatalf("%s: want isError with one text block and no structuredContent, got isError=%v, %d blocks, %v",
			what, res.IsError, len(res.Content), res.StructuredContent)
	}
	return Text(res)
}

// Code is the JSON-RPC error code of err (0 when it is none).
func Code(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// output is tool's output schema as tools/list publishes it.
func (c *Client) output(t testing.TB, tool string) *jsonschema.Resolved {
	t.Helper()
	c.outputsMu.Lock()
	defer c.outputsMu.Unlock()
	if c.outputs == nil {
		list, err := c.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.outputs = map[string]*jsonschema.Resolved{}
		for _, tl := range list.Tools {
			var s jsonschema.Schema
			raw, _ := json.Marshal(tl.OutputSchema)
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("%s: output schema: %v", tl.Name, err)
			}
			if c.outputs[tl.Name], err = s.Resolve(nil); err != nil {
				t.Fatalf("%s: output schema: %v", tl.Name, err)
			}
		}
	}
	r, ok := c.outputs[tool]
	if !ok {
		t.Fatalf("tools/list has no %s", tool)
	}
	return r
}

// Text is the first content block's text ("" when it is none).
func Text(res *sdk.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*sdk.TextContent); ok {
		return tc.Text
	}
	return ""
}

// Canon is v as JSON, map keys sorted.
func Canon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
