package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// tool is a spec with its parsed schemas and its handler.
type tool struct {
	schemas
	name string
	log  func(ctx context.Context, msg string, args ...any)
	run  func(*call) (any, error)
	// scoped is the call's context and an agent's grant (Handler.scoped).
	scoped func(context.Context) (context.Context, *oauth.Grant, error)
}

func (h *Handler) newTool(s spec) (*tool, error) {
	sc, err := s.parse()
	if err != nil {
		return nil, err
	}
	run, err := h.handlerOf(s.name)
	if err != nil {
		return nil, err
	}
	return &tool{schemas: sc, name: s.name, log: h.deps.Log.ErrorContext, run: run, scoped: h.scoped}, nil
}

// call is one tools/call: its context (the caller's principal in it), the
// caller, the request (its session and progress token) and the checked arguments,
// defaults applied.
type call struct {
	ctx  context.Context
	user string // the caller's user id
	// grant is an agent's (a cba_ token's), nil for the user's own call:
	// the tools see only the boxes it created (scope.go).
	grant *oauth.Grant
	req   *sdk.CallToolRequest
	args  map[string]any
}

// str is the string argument name ("" when absent).
func (c *call) str(name string) string { s, _ := c.args[name].(string); return s }

// flag is the boolean argument name (false when absent).
func (c *call) flag(name string) bool { b, _ := c.args[name].(bool); return b }

// refusal is a tool that ran but cannot do what was asked: an isError
// result with one text block, the message, and no structuredContent.
type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error { return refusal{fmt.Sprintf(format, args...)} }

// call checks the arguments against the input schema (a mismatch is
// -32602), runs the tool and answers its object as structuredContent and
// as one JSON text block.
//
// Contract: Control MCP, results and errors.
func (t *tool) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: arguments: not a JSON object: %v", t.name, err)}
		}
	}
	if err := t.check.ApplyDefaults(&args); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: arguments: %v", t.name, err)}
	}
	if err := t.check.Validate(args); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: arguments do not match the input schema: %v", t.name, err)}
	}
	user, ok := tokens.UserID(ctx)
	if !ok {
		return t.failure(ctx, errors.New("no caller in the context"))
	}
	scoped, grant, err := t.scoped(ctx)
	if err != nil {
		return t.failure(ctx, err)
	}
	out, err := t.run(&call{ctx: scoped, user: user, grant: grant, req: req, args: args})
	if err != nil {
		return t.failure(ctx, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return t.failure(ctx, err)
	}
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil
}

// refusedCodes are the Boxes service's answers that say the call cannot be
// done as asked (boxes.proto): the model reads why and acts.
var refusedCodes = map[connect.Code]bool{
	connect.CodeInvalidArgument: true, connect.CodeNotFound: true, connect.CodeAlreadyExists: true,
	connect.CodeFailedPrecondition: true, connect.CodeResourceExhausted: true, connect.CodeUnavailable: true,
	connect.CodePermissionDenied: true, connect.CodeAborted: true, connect.CodeOutOfRange: true,
}

// failure is err as the tool's answer, at this one edge: a refusal or a
// refused code of the service is isError; anything else (the service's
// internal error, a revoked token's call, a bug) is -32603, logged.
func (t *tool) failure(ctx context.Context, err error) (*sdk.CallToolResult, error) {
	var r refusal
	var ce *connect.Error
	switch {
	case errors.As(err, &r):
	case errors.As(err, &ce) && refusedCodes[ce.Code()]:
		r.msg = ce.Message()
	default:
		t.log(ctx, "control MCP tool failed", "tool", t.name, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: t.name + " failed inside the api; try again"}
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: t.name + ": " + r.msg}}}, nil
}

// requestID is a fresh request_id for one mutating call: a tool call is
// not repeated by the protocol, so each is its own request.
func requestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}
