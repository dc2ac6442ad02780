package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
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
// public origin). The console's Boxes page lists, makes and revokes
// shares and reads their logs through shares.Console on con's sessions.
//
// A revoke ends the share's viewers on every api: each follows the
// revokes (shares.Follow); the returned func stops that when ctx has
// ended.
func mountShares(ctx context.Context, srv *server.Server, db *database.DB, viewers *shares.Viewers, screens *session.Service, bh *boxes.Handler, index *tokens.Index, con *console.Console, origin string, now func() time.Time, log *slog.Logger) (func(), error) {
	st := shares.NewStore(db.Pool, now)
	followed, err := shares.Follow(ctx, db.URL, st, viewers, log)
	if err != nil {
		return nil, fmt.Errorf("follow the shares' revokes: %w", err)
	}
	path, h := controlv1connect.NewSharesHandler(shares.NewService(st, viewers, tokens.UserID, origin), callOptions(index)...)
	srv.Handle(path, index.Guard(h))
	srv.HandleStream(shares.SocketPath, shares.Socket(st, viewers, screens, bh.Call, log))
	screenpage.MountShare(srv)
	shares.NewConsole(st, viewers, con.UserID, origin, log).Mount(srv)
	return followed, nil
}
