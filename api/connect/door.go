package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// DoorPath is the mode B door (Contract: Connect, Mode B door).
const DoorPath = "/cocoonbox.mcp/connect"

// MaxDoorBody bounds one request to the door.
const MaxDoorBody = 4 << 20

// toolSep joins a connector id and its tool's name on the door: ids have
// no "_", so the first "__" splits them back.
const toolSep = "__"

// callerKey is the context key of the door's caller: a doorCaller.
type callerKey struct{}

// doorCaller is who calls through a door: the user whose connectors it
// serves, the door (DoorMCP, DoorBox), for the box door the audit caller
// (box:<box id>; the mode B door's is the client's name), and a context
// that ends when the token it came with stops working (tokens.Bind; the
// box door's key has no token, and its context never ends).
type doorCaller struct {
	user, door, caller string
	token              context.Context
}

// Door is the mode B door's handler: a user's own token (personal or a
// device token; an agent's cba_ or an invite-scoped cbit_ is refused
// before any lookup by tokens.Index.Check) as a Bearer, else 401 with no
// body. Every call ends when its token stops working (tokens.Bind), with
// a tool error saying so (ErrTokenEnded). Each
// POST is served by an MCP server (stateless, the official Go SDK's)
// made of the user's connectors at that moment: tools named
// <connector>__<tool>, those off (or of a connector that needs
// reconnecting) left out, a call of them by name refused and audited,
// those ask waiting for the user's answer (Broker.Answer).
func (b *Broker) Door(index *tokens.Index, log *slog.Logger) http.Handler {
	mcpH := b.mcpHandler(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		p, err := index.Check(token)
		if !ok || err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		server.SetUser(r.Context(), p.UserID)
		// The token's end ends a call with ErrTokenEnded, which the call
		// answers; the request goes on to carry that answer.
		bound, done := tokens.Bind(r.Context(), p)
		defer done()
		ctx := context.WithValue(r.Context(), callerKey{}, doorCaller{user: p.UserID, door: DoorMCP, token: bound})
		mcpH.ServeHTTP(w, r.WithContext(ctx))
	})
}

// mcpHandler is the doors' MCP server (the official Go SDK's streamable
// HTTP handler, stateless) for the doorCaller in each request's context.
func (b *Broker) mcpHandler(log *slog.Logger) http.Handler {
	return sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		dc, _ := r.Context().Value(callerKey{}).(doorCaller)
		return b.server(r.Context(), dc, log)
	}, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: MaxDoorBody,
		Logger:              log,
		// The mode B door serves behind the edge's proxy on loopback with
		// the public Host, the box door on the bridge under the gateway's
		// address; a DNS-rebound page has no key to send.
		DisableLocalhostProtection: true,
	})
}

// server is the MCP server of dc's user's connectors now; one that cannot
// be read leaves a server without tools and a log line.
func (b *Broker) server(ctx context.Context, dc doorCaller, log *slog.Logger) *sdk.Server {
	user := dc.user
	s := sdk.NewServer(&sdk.Implementation{Name: "cocoonbox-connect", Version: "1"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	cs, err := b.List(ctx, user)
	if err != nil {
		log.Warn("connect door: the user's connectors", "user", user, "err", err)
		return s
	}
	hidden := map[string]hiddenTool{}
	s.AddReceivingMiddleware(b.refuseHidden(dc, hidden, log))
	for _, c := range cs {
		for i, t := range c.Tools {
			p := t.Policy.effective()
			if c.NeedsReconnect {
				hidden[c.ID+toolSep+t.Name] = hiddenTool{c.ID, t.Name, AuditNeedsReconnect}
				continue
			}
			if p == PolicyOff {
				hidden[c.ID+toolSep+t.Name] = hiddenTool{c.ID, t.Name, AuditOff}
				continue
			}
			up := c.schemas[i]
			tool := &sdk.Tool{Name: c.ID + toolSep + t.Name, Description: t.Description, InputSchema: up.InputSchema,
				Annotations: up.Annotations}
			if tool.InputSchema == nil {
				tool.InputSchema = map[string]any{"type": "object"}
			}
			s.AddTool(tool, b.callHandler(ctx, dc, c, t.Name, p, log))
		}
	}
	return s
}

// callHandler calls tool of c for dc's user and writes the call's audit
// row (Contract: Connect, Audit). reqCtx is the door request's context:
// the sdk runs a stateless request's handler under a context of its own,
// so the call is tied to reqCtx here, and to dc.token, whose end ends it
// with ErrTokenEnded.
func (b *Broker) callHandler(reqCtx context.Context, dc doorCaller, c Connector, tool string, p Policy, log *slog.Logger) sdk.ToolHandler {
	user := dc.user
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		start := time.Now()
		a := callActivity(req, dc, c.ID, tool, AuditAllow)
		var status atomic.Int32
		defer func() { b.auditCall(ctx, user, &a, start, &status, res, log) }()
		ctx, done := b.open.begin(ctx, user, c.grantID)
		defer done()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(reqCtx, func() { cancel(context.Cause(reqCtx)) })()
		defer context.AfterFunc(dc.token, func() {
			if reqCtx.Err() == nil { // else the client went away
				cancel(ErrTokenEnded)
			}
		})()
		if p == PolicyAsk {
			d, err := b.await(ctx, user, dc.door, c, tool)
			if err != nil { // never asked: audited as unanswered
				a.Decision = AuditApprovalRequired
				return nil, err
			}
			switch d {
			case DecisionAlways:
				a.Decision = AuditApproved
				if err := b.SetPolicy(ctx, user, c.ID, tool, PolicyAllow); err != nil {
					return nil, err
				}
			case DecisionOnce:
				a.Decision = AuditApproved
			default:
				a.Decision = AuditApprovalRequired
				if d == DecisionDeny {
					a.Decision = AuditDenied
				}
				if cause := ended(ctx); cause != nil {
					return toolError(cause.Error()), nil
				}
				return toolError(fmt.Sprintf("%s%s%s needs your approval, and it was denied or not given within %s", c.ID, toolSep, tool, ApprovalTimeout)), nil
			}
		}
		err = b.use(ctx, user, c, func(cu Custom) (err error) {
			res, err = b.up.callTool(ctx, cu, tool, req.Params.Arguments, &status)
			return err
		})
		switch {
		case err == nil && !res.IsError:
			a.Outcome = OutcomeOK
		case err != nil && (status.Load() < 0 || status.Load() > 0 && ctx.Err() != nil):
			// The server had the call and did not answer it.
			a.Outcome = OutcomeUnknown
		}
		if errors.Is(err, ErrNeedsReconnect) {
			a.Decision = AuditNeedsReconnect
		}
		if cause := ended(ctx); cause != nil {
			return toolError(cause.Error()), nil
		}
		if errors.Is(err, ErrUpstream) {
			return toolError(err.Error()), nil
		}
		return res, err
	}
}

// ended is why ctx, a door call's, ended, when it ended with a
// disconnect, sign out everywhere or its token's end; else nil.
func ended(ctx context.Context) error {
	for _, cause := range []error{ErrDisconnected, ErrSignedOut, ErrTokenEnded} {
		if errors.Is(context.Cause(ctx), cause) {
			return cause
		}
	}
	return nil
}

// callActivity is the audit row of dc's door call of tool of connector,
// as it begins: an error until it is known to be ok.
func callActivity(req *sdk.CallToolRequest, dc doorCaller, connector, tool, decision string) Activity {
	who := dc.caller
	if who == "" {
		name := ""
		if ci := req.ClientInfo(); ci != nil {
			name = ci.Name
		}
		who = caller(name)
	}
	return Activity{Connector: connector, Tool: tool, Door: dc.door, Caller: who, Decision: decision, Outcome: OutcomeError,
		RequestBytes: int64(len(req.Params.Arguments)), args: append([]byte{}, req.Params.Arguments...)}
}

// auditCall writes a, a door call begun at start whose server last
// answered status (nil, or 0, when it was never reached) and which
// answered res; a failure to write is logged.
func (b *Broker) auditCall(ctx context.Context, user string, a *Activity, start time.Time, status *atomic.Int32, res *sdk.CallToolResult, log *slog.Logger) {
	a.LatencyMS = time.Since(start).Milliseconds()
	if status != nil {
		if s := int(status.Load()); s > 0 {
			a.UpstreamStatus = &s
		}
	}
	if res != nil {
		if j, err := json.Marshal(res); err == nil {
			a.ResponseBytes = int64(len(j))
		}
	}
	if err := b.audit(ctx, user, *a); err != nil {
		log.Warn("connect door: audit", "user", user, "connector", a.Connector, "tool", a.Tool, "err", err)
	}
}

// hiddenTool is a tool the door leaves out (policy off, or its connector
// needs reconnecting), which a client may still call by name: the call
// is refused and audited with decision.
type hiddenTool struct{ connector, tool, decision string }

// refuseHidden is the door's receiving middleware: a tools/call of a
// hidden tool answers a tool error saying why and writes its audit row
// (Contract: Connect, Audit: off, needs_reconnect), where the sdk would
// answer an unknown tool and nothing would be written.
func (b *Broker) refuseHidden(dc doorCaller, hidden map[string]hiddenTool, log *slog.Logger) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			call, ok := req.(*sdk.CallToolRequest)
			if method != "tools/call" || !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			h, ok := hidden[call.Params.Name]
			if !ok {
				return next(ctx, method, req)
			}
			start := time.Now()
			a := callActivity(call, dc, h.connector, h.tool, h.decision)
			res := toolError(fmt.Sprintf("%s is off in your Connect policies", call.Params.Name))
			if h.decision == AuditNeedsReconnect {
				res = toolError(fmt.Sprintf("%s: %s needs reconnecting in the console", call.Params.Name, h.connector))
			}
			b.auditCall(ctx, dc.user, &a, start, nil, res, log)
			return res, nil
		}
	}
}

func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
