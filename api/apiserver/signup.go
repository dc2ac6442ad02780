package apiserver

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/usage"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// mountSignup mounts signup's queue, admission, invites, invite-scoped
// tokens and the admin's and the queue's pages on srv, puts the
// invite-scoped token check around the whole mux, and runs admission on
// every user change any api or the admin CLI makes (the token index's
// NOTIFY cocoonbox_users: a user deleted or disabled) and every 5 min
// until ctx ends. Call it before index.Start.
//
// Contract: Sign-in with GitHub and signup.
func mountSignup(ctx context.Context, srv *server.Server, cfg config.Config, pool *pgxpool.Pool, store *users.Store,
	con *console.Console, index *tokens.Index, models *usage.Service, log *slog.Logger) *signup.Signup {
	var pushCap func(context.Context, pgx.Tx, string) error
	if models != nil {
		pushCap = func(ctx context.Context, tx pgx.Tx, user string) error { return models.PushCap(ctx, tx, user) }
	}
	s := signup.New(signup.Deps{Pool: pool, Log: log, Session: con.Session, ClearSession: con.ClearCookie,
		DeleteUser: func(ctx context.Context, name string) error {
			_, err := DeleteUser(ctx, pool, store, name)
			return err
		},
		Secure: cfg.Secure(), PushCap: pushCap})
	s.Mount(srv)
	srv.Wrap(s.GuardInviteTokens)
	addSignupSections(con)
	index.OnChange(func(string) { s.Trigger() })
	go s.Run(ctx)
	return s
}

// addSignupSections lists signup's pages on the console's home: the
// account page for everyone, the admin page for admins.
func addSignupSections(con *console.Console) {
	con.AddSection(console.Section{Title: "Your account", Path: "/cb/account", Blurb: "Your personal token, or delete your account.", Page: &signup.AccountPage})
	con.AddSection(console.Section{Title: "Admin", Path: "/cb/admin", Blurb: "Signup, the queue, invites, invite-scoped tokens and agent-box caps.", AdminsOnly: true, Page: &signup.AdminPage})
	con.AddPage("/cb/queue", signup.QueuePage)
}

// DeleteUser is the admin delete (cocoonbox-api users delete, and a
// self-delete from the console): the row goes with its tokens, sessions,
// identities, grants and queue entry (ON DELETE CASCADE) and every api is
// told (NOTIFY); its boxes' rows go with it, and their machines and saves
// are removed by a running api's next recovery pass. It answers how many
// boxes the user held.
func DeleteUser(ctx context.Context, pool *pgxpool.Pool, store *users.Store, name string) (int, error) {
	held, err := boxes.Held(ctx, pool, name)
	if err != nil {
		return 0, err
	}
	return held, store.Delete(ctx, name)
}

// AdmitAfter runs signup's admission once from an admin command that freed
// a seat (users delete, users disable), answering how many it admitted;
// the running apis also admit on the change's NOTIFY.
func AdmitAfter(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (int, error) {
	admitted, err := signup.New(signup.Deps{Pool: pool, Log: log}).Admit(ctx)
	return len(admitted), err
}
