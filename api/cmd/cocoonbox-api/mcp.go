package main

import (
	"log/slog"
	"net/url"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/mcp"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountControlMCP mounts the control MCP at mcp.Path on srv: the Boxes
// service's handler h called in process as the caller (it follows the
// operations it waits on with h.WaitOperation), tokens checked by index.
// The issuer's host is served beside localhost (the api behind a proxy on
// loopback).
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
func mountControlMCP(srv *server.Server, h *boxes.Handler, index *tokens.Index, issuer string, log *slog.Logger) {
	var hosts []string
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		hosts = append(hosts, u.Host)
	}
	mcp.New(mcp.Deps{Boxes: h, Follow: h.WaitOperation, Tokens: index, Hosts: hosts, Log: log}).Mount(srv)
}
