package apiserver

import (
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/screenpage"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountSession mounts cocoonbox.control.v1.Session (Session.Exec, what
// cocoonbox rsh calls; Session.Screen) behind the token check, on the boxes of bh
// (Contract: Remote command (Session.Exec, cocoonbox rsh)); the token is
// checked before anything of the call is read; bh counts each call but
// Events as a client call of its box (idle hibernate).
//
// The screen's WebSocket form (session.ScreenSocketPath) takes the console
// session instead of a token, and ends with it (console.BindSession); the
// console's screen page (package screenpage) is its browser client. It
// answers the service, which the shares' socket relays through.
func mountSession(srv *server.Server, bh *boxes.Handler, index *tokens.Index, con *console.Console, stall time.Duration, log *slog.Logger) *session.Service {
	svc := session.New(bh, tokens.UserID, log)
	svc.SetStall(stall)
	// A stream: its messages are bounded by the service, not its total.
	path, h := svc.Handler(connect.WithInterceptors(index.Interceptor(), bh.CallInterceptor()))
	srv.HandleStream(path, session.WithWriteDeadlines(index.Guard(h)))
	srv.HandleStream(session.ScreenSocketPath, svc.ScreenSocket(con.BindSession, bh.Call))
	screenpage.Mount(srv, con.UserID)
	return svc
}
