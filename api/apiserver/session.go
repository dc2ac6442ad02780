package apiserver

import (
	"log/slog"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountSession mounts cocoonbox.control.v1.Session (Session.Exec, what
// cocoonbox rsh calls) behind the token check, on the boxes of boxes
// (Contract: Remote command (Session.Exec, cocoonbox rsh)); the token is
// checked before anything of the call is read; calls counts each call but
// Events as a client call of its box (idle hibernate).
func mountSession(srv *server.Server, boxes session.Locator, index *tokens.Index, calls connect.Interceptor, log *slog.Logger) {
	// A stream: its messages are bounded by the service, not its total.
	path, h := session.New(boxes, tokens.UserID, log).Handler(connect.WithInterceptors(index.Interceptor(), calls))
	srv.HandleStream(path, index.Guard(h))
}
