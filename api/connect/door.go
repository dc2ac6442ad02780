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

// userKey is the context key of the door's caller.
type userKey struct{}

// Door is the mode B door's handler: a user's own token (personal or a
// device token; an agent's cba_ or an invite-scoped cbit_ is refused
// before any lookup by tokens.Index.Check) as a Bearer, else 401 with no
// body. Every request ends when its token is revoked (tokens.Bind). Each
// POST is served by an MCP server (stateless, the official Go SDK's)
// made of the user's connectors at that moment: tools named
// <connector>__<tool>, those off left out, those ask waiting for the
// user's answer (Broker.Answer).
func (b *Broker) Door(index *tokens.Index, log *slog.Logger) http.Handler {
	mcpH := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		user, _ := r.Context().Value(userKey{}).(string)
		return b.server(r.Context(), user, log)
	}, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: MaxDoorBody,
		Logger:              log,
		// The door serves behind the edge's proxy on loopback with the
		// public Host; a DNS-rebound page has no bearer to send.
		DisableLocalhostProtection: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		p, err := index.Check(token)
		if !ok || err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		server.SetUser(r.Context(), p.UserID)
		ctx, done := tokens.Bind(r.Context(), p)
		defer done()
		ctx = context.WithValue(ctx, userKey{}, p.UserID)
		mcpH.ServeHTTP(w, r.WithContext(ctx))
	})
}

// server is the MCP server of user's connectors now; one that cannot be
// read leaves a server without tools and a log line.
func (b *Broker) server(ctx context.Context, user string, log *slog.Logger) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "cocoonbox-connect", Version: "1"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}})
	cs, err := b.List(ctx, user)
	if err != nil {
		log.Warn("connect door: the user's connectors", "user", user, "err", err)
		return s
	}
	for _, c := range cs {
		if c.NeedsReconnect {
			continue
		}
		for i, t := range c.Tools {
			p := t.Policy.effective()
			if p == PolicyOff {
				continue
			}
			up := c.schemas[i]
			tool := &sdk.Tool{Name: c.ID + toolSep + t.Name, Description: t.Description, InputSchema: up.InputSchema,
				Annotations: up.Annotations}
			if tool.InputSchema == nil {
				tool.InputSchema = map[string]any{"type": "object"}
			}
			s.AddTool(tool, b.callHandler(ctx, user, c, t.Name, p, log))
		}
	}
	return s
}

// callHandler calls tool of c for user and writes the call's audit row
// (Contract: Connect, Audit). reqCtx is the door request's context,
// which ends with its token (tokens.Bind): the sdk runs a stateless
// request's handler under a context of its own, so the call is tied to
// reqCtx here.
func (b *Broker) callHandler(reqCtx context.Context, user string, c Connector, tool string, p Policy, log *slog.Logger) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		start := time.Now()
		name := ""
		if ci := req.ClientInfo(); ci != nil {
			name = ci.Name
		}
		a := Activity{Connector: c.ID, Tool: tool, Door: DoorMCP, Caller: caller(name), Decision: AuditAllow, Outcome: OutcomeError,
			RequestBytes: int64(len(req.Params.Arguments)), args: append([]byte{}, req.Params.Arguments...)}
		var status atomic.Int32
		defer func() {
			a.LatencyMS = time.Since(start).Milliseconds()
			if s := int(status.Load()); s > 0 {
				a.UpstreamStatus = &s
			}
			if res != nil {
				if j, jerr := json.Marshal(res); jerr == nil {
					a.ResponseBytes = int64(len(j))
				}
			}
			if aerr := b.audit(ctx, user, a); aerr != nil {
				log.Warn("connect door: audit", "user", user, "connector", c.ID, "tool", tool, "err", aerr)
			}
		}()
		ctx, done := b.open.begin(ctx, user, c.ID)
		defer done()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(reqCtx, func() { cancel(context.Cause(reqCtx)) })()
		if p == PolicyAsk {
			switch d := b.pending.await(ctx, user, c.ID, tool); d {
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
				if errors.Is(context.Cause(ctx), ErrDisconnected) {
					return toolError(ErrDisconnected.Error()), nil
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
		if errors.Is(context.Cause(ctx), ErrDisconnected) {
			return toolError(ErrDisconnected.Error()), nil
		}
		if errors.Is(err, ErrUpstream) {
			return toolError(err.Error()), nil
		}
		return res, err
	}
}

func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
