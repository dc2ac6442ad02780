package main

import (
	"log/slog"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountSession mounts cocoonbox.control.v1.Session (Session.Exec, what
// cocoonbox rsh calls) behind the token check, on the boxes of boxes
// (Contract: Remote command (Session.Exec, cocoonbox rsh)).
func mountSession(srv *server.Server, boxes session.Locator, index *tokens.Index, log *slog.Logger) {
	srv.Handle(session.New(boxes, tokens.UserID, log).Handler(connect.WithInterceptors(index.Interceptor())))
}
