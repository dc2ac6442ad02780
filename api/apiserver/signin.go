package apiserver

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	useragents "github.com/cocoonbox/cocoonbox/api/agents"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/devices"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/signin"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// mountSignIn mounts the browser sign-in of the first-party clients
// (package signin) and the devices (the console's Devices section and the
// Account gRPC service) on srv. Call it before index.Start: it follows the
// index's changes. With OAuth for agents on, the agents' requests on the
// shared endpoints go to agents.
//
// Contract: Browser sign-in and device tokens.
func mountSignIn(srv *server.Server, pool *pgxpool.Pool, issuer string, index *tokens.Index, personal *tokens.Store, con *console.Console, agents *agentsOAuth, viewers *shares.Viewers, log *slog.Logger) {
	dev := devices.NewStore(pool, signIns{con, personal, viewers}, index.Reload)
	index.OnChange(dev.Changed)

	principal := func(r *http.Request) (signin.Principal, bool) {
		u, ok := con.Session(r)
		return signin.Principal{UserID: u.ID, UserName: u.Name}, ok
	}
	si := signin.NewHandler(signin.NewStore(pool, devices.InTx{}, index.Reload), issuer, principal, dev.RevokeSecret, log)
	if agents != nil { // OAuth for agents shares the endpoints
		si.WithAgents(agents.agents)
	}
	si.Mount(srv)

	devices.NewConsole(dev, con.UserID, con.ClearCookie, log).Mount(srv)
	con.AddSection(console.Section{Title: "Devices", Path: "/cb/devices", Blurb: "Where the cocoonbox CLI and app are signed in; revoke one, or sign out everywhere.", Page: &devices.Page})

	caller := func(ctx context.Context) (devices.Caller, bool) {
		p, ok := tokens.FromContext(ctx)
		if !ok {
			return devices.Caller{}, false
		}
		return devices.Caller{UserID: p.UserID, DeviceID: p.DeviceID}, true
	}
	path, h := controlv1connect.NewAccountHandler(devices.NewAccount(dev, caller, log), callOptions(index)...)
	srv.Handle(path, index.Guard(h))
}

// signIns is what sign out everywhere ends besides the device tokens.
type signIns struct {
	con      *console.Console
	personal *tokens.Store
	viewers  *shares.Viewers
}

// EndSessions ends the console sessions, the viewers open on the user's
// shares (the shares stay), the Connect door calls open on every api
// (the connected accounts stay) and the agents' grants (OAuth for agents: sign
// out everywhere ends every grant too). Contract: Sign out everywhere, "A
// named share's screen open in the console ends with its viewer too".
func (s signIns) EndSessions(ctx context.Context, tx pgx.Tx, userID string) error {
	if err := s.con.EndSessions(ctx, tx, userID); err != nil {
		return err
	}
	s.viewers.EndUser(userID)
	// Every api ends the user's open Connect door calls on commit.
	if err := connect.EndUser(ctx, tx, userID); err != nil {
		return err
	}
	return useragents.EndAll(ctx, tx, userID)
}

func (s signIns) RevokePersonal(ctx context.Context, tx pgx.Tx, userID string) error {
	return s.personal.RevokePersonal(ctx, tx, userID)
}
