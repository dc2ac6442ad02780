// Package mcp is the control MCP: the lifecycle of the caller's own boxes
// (list, status, ensure, create, hibernate, save, upgrade, delete, usage)
// as MCP tools, so a coding agent the user runs manages their boxes
// without the app. It serves MCP's streamable HTTP at client.MCPPath on the api's
// listener with the official go-sdk, behind the sdk's bearer middleware
// wired to the api's token index, and calls the Boxes service in process
// with the caller's principal in the context.
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// MaxBody is the largest request body the MCP reads, in bytes: a tool
// call's arguments are a few hundred; a larger body is 413.
const MaxBody = 64 << 10

// ProtocolVersions are the MCP revisions served, newest first: those with
// sessions (Mcp-Session-Id), whose lifecycle the contract describes.
var ProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// Boxes is what the tools call of cocoonbox.control.v1.Boxes: the
// service's handler (controlv1connect.BoxesHandler has these methods),
// called in process with the caller's principal in the context
// (tokens.FromContext). Its errors are connect errors (see boxes.proto).
type Boxes interface {
	List(context.Context, *connect.Request[controlv1.ListBoxesRequest]) (*connect.Response[controlv1.ListBoxesResponse], error)
	Status(context.Context, *connect.Request[controlv1.BoxStatusRequest]) (*connect.Response[controlv1.BoxStatusResponse], error)
	Create(context.Context, *connect.Request[controlv1.CreateBoxRequest]) (*connect.Response[controlv1.OperationResponse], error)
	Ensure(context.Context, *connect.Request[controlv1.EnsureBoxRequest]) (*connect.Response[controlv1.OperationResponse], error)
	Hibernate(context.Context, *connect.Request[controlv1.BoxOperationRequest]) (*connect.Response[controlv1.OperationResponse], error)
	Save(context.Context, *connect.Request[controlv1.BoxOperationRequest]) (*connect.Response[controlv1.OperationResponse], error)
	Upgrade(context.Context, *connect.Request[controlv1.ConfirmedBoxRequest]) (*connect.Response[controlv1.OperationResponse], error)
	Delete(context.Context, *connect.Request[controlv1.ConfirmedBoxRequest]) (*connect.Response[controlv1.OperationResponse], error)
	Usage(context.Context, *connect.Request[controlv1.UsageRequest]) (*connect.Response[controlv1.UsageResponse], error)
}

// Follow calls each with every step of the operation operationID of the
// user userID, in order from its first, and answers the last one (phase
// done or failed); it stops with ctx. The operation itself runs on.
// boxes.Service.WaitOperation is one.
type Follow func(ctx context.Context, userID, operationID string, each func(*controlv1.Operation)) (*controlv1.Operation, error)

// Deps are what the control MCP is built from.
type Deps struct {
	Boxes Boxes
	// Schedules serves the schedule tools (nil: they refuse).
	Schedules Schedules
	Follow    Follow
	// Calls opens a client call for each tools/call, so a tool working on
	// a box keeps it from idle hibernate while it runs
	// (boxes.Handler.Call); nil counts none. A GET stream is no call.
	Calls  func(context.Context) (context.Context, func())
	Tokens *tokens.Index
	// Grants checks an agent's access token (cba_; api/oauth's Grants);
	// nil with OAuth off, when a cba_ token is refused as the user-token
	// check refuses it.
	Grants interface {
		Check(token string) (*oauth.Grant, error)
	}
	// Scope keeps an agent's calls to its grant's boxes and caps
	// (api/agents' Caps); an agent's call without one fails.
	Scope Scope
	// Hosts are the Host header values accepted on a loopback listener
	// besides localhost's (the api's public host behind a proxy);
	// anything else is 403, against DNS rebinding.
	Hosts []string
	// ResourceMetadata is the URL of the control MCP's protected resource
	// metadata (RFC 9728), which a 401 names in WWW-Authenticate; empty
	// with OAuth off.
	ResourceMetadata string
	// Log gets the failures answered -32603 (required).
	Log *slog.Logger
}

// SessionIdle is how long a session lives without a request: an agent
// back after it gets 404 and initializes a new one, as the protocol says.
const SessionIdle = time.Hour

// Handler is the control MCP's HTTP handler.
type Handler struct {
	deps  Deps
	tools map[string]*tool
	http  http.Handler
}

// New builds the control MCP. It panics on a tool table that does not
// parse, which tests catch.
func New(d Deps) *Handler {
	h := &Handler{deps: d, tools: map[string]*tool{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "cocoonbox-control", Version: "1"},
		&sdk.ServerOptions{SupportedProtocolVersions: ProtocolVersions, Logger: d.Log})
	for _, s := range specs {
		t, err := h.newTool(s)
		if err != nil {
			panic(err)
		}
		h.tools[s.name] = t
		srv.AddTool(&sdk.Tool{Name: s.name, Title: s.annotations.Title, Description: s.description, Annotations: s.annotations, InputSchema: t.input, OutputSchema: t.output}, t.call)
	}
	srv.AddReceivingMiddleware(h.bind, h.count)
	streamable := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		MaxRequestBodyBytes: MaxBody,
		SessionTimeout:      SessionIdle,
		Logger:              d.Log,
		// hostCheck below does it, with Hosts besides localhost.
		DisableLocalhostProtection: true,
	})
	h.http = hostCheck(d.Hosts, h.requireBearer(gate(streamable)))
	return h
}

// ServeHTTP answers the MCP's streamable HTTP requests.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.http.ServeHTTP(w, r) }

// Mount serves h at client.MCPPath on srv.
func (h *Handler) Mount(srv *server.Server) { srv.Handle(client.MCPPath, h) }

// handlerOf is the handler of the tool named name; a spec without one is
// an error New panics on.
func (h *Handler) handlerOf(name string) (func(*call) (any, error), error) {
	f, ok := map[string]func(*call) (any, error){
		"box_list": h.boxList, "box_status": h.boxStatus, "box_ensure": h.boxEnsure,
		"box_create": h.boxCreate, "box_hibernate": h.boxHibernate, "box_save": h.boxSave,
		"box_upgrade": h.boxUpgrade, "box_delete": h.boxDelete, "usage": h.usage,
		"box_schedule_set": h.boxScheduleSet, "box_schedule_list": h.boxScheduleList, "box_schedule_clear": h.boxScheduleClear,
	}[name]
	if !ok {
		return nil, fmt.Errorf("tool %s: no handler", name)
	}
	return f, nil
}

// count opens a client call (Deps.Calls) around each tools/call.
func (h *Handler) count(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if h.deps.Calls == nil || method != "tools/call" {
			return next(ctx, method, req)
		}
		ctx, end := h.deps.Calls(ctx)
		defer end()
		return next(ctx, method, req)
	}
}
