package apiserver

import (
	"context"
	"log/slog"
	"net/url"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/mcp"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountControlMCP mounts the control MCP at client.MCPPath on srv: the Boxes
// service's handler h called in process as the caller, the operations its
// tools wait on followed with the Service's WaitOperation (its errors as
// boxes.Code's connect codes; UNAVAILABLE without a supervisor), tokens
// checked by index. The issuers' hosts are served beside localhost (the
// api behind a proxy on loopback). With OAuth for agents on (agents not
// nil) a 401 names the resource's metadata and an agent's token works.
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
func mountControlMCP(srv *server.Server, h *boxes.Handler, schedules mcp.Schedules, index *tokens.Index, agents *agentsOAuth, log *slog.Logger, issuers ...string) {
	follow := func(ctx context.Context, userID, opID string, each func(*controlv1.Operation)) (*controlv1.Operation, error) {
		svc, err := h.Service()
		if err == nil {
			var last *controlv1.Operation
			if last, err = svc.WaitOperation(ctx, userID, opID, each); err == nil {
				return last, nil
			}
		}
		return nil, connect.NewError(boxes.Code(err), err)
	}
	var hosts []string
	for _, issuer := range issuers {
		if u, err := url.Parse(issuer); err == nil && u.Host != "" {
			hosts = append(hosts, u.Host)
		}
	}
	d := mcp.Deps{Boxes: h, Schedules: schedules, Follow: follow, Calls: h.Call, Tokens: index, Hosts: hosts, Log: log}
	if agents != nil { // an agent's cba_ token works here, and a 401 names the resource's metadata
		d.Grants, d.ResourceMetadata, d.Scope = agents.grants, agents.prm, agents.caps
	}
	mcp.New(d).Mount(srv)
}
