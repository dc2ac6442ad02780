package apiserver

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/screenpage"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountShares mounts the shares of a box's screen (issue 43, Deliver 4;
// docs/screen.md, "Shares"): cocoonbox.control.v1.Shares behind the token
// check (a share secret is refused there: tokens.ErrShareSecret), the
// share page (screenpage.MountShare) and its socket, which takes only a
// share's secret and relays through screens as the share's owner, each
// viewer a client call of its box (bh.Call). viewers are the open viewers
// a revoke and sign out everywhere end; origin is the links' (the api's
// public origin).
func mountShares(srv *server.Server, pool *pgxpool.Pool, viewers *shares.Viewers, screens *session.Service, bh *boxes.Handler, index *tokens.Index, origin string, now func() time.Time, log *slog.Logger) {
	st := shares.NewStore(pool, now)
	path, h := controlv1connect.NewSharesHandler(shares.NewService(st, viewers, tokens.UserID, origin), callOptions(index)...)
	srv.Handle(path, index.Guard(h))
	srv.HandleStream(shares.SocketPath, shares.Socket(st, viewers, screens, bh.Call, log))
	screenpage.MountShare(srv)
}
