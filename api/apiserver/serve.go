package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// Serve runs the api of cfg on cfg.Listen until ctx ends, logging to log.
func Serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	start := time.Now()
	db, err := OpenDB(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	var pushKeys keysPush
	keys, err := startVault(ctx, cfg, db, pushKeys.push, log)
	if err != nil {
		return err
	}

	// The token index keeps every live token of the database in memory and
	// follows every api's changes (NOTIFY cocoonbox_users).
	index := tokens.NewIndex(db.Pool, db.URL, log)

	srv := server.New(log, func(ctx context.Context) error { return db.Pool.Ping(ctx) })
	srv.SetTimeouts(server.Timeouts{ReadHeader: cfg.HTTP.ReadHeaderTimeout, Read: cfg.HTTP.ReadTimeout, Idle: cfg.HTTP.IdleTimeout,
		PingAfter: cfg.HTTP.PingAfter, PingTimeout: cfg.HTTP.PingTimeout})
	srv.SetConnLimit(cfg.HTTP.MaxConnsPerAddress, cfg.TrustedPrefixes())
	userStore := users.NewStore(db.Pool)
	tokenStore := tokens.NewStore(db.Pool, index)
	con := console.New(console.Deps{Pool: db.Pool, Users: userStore, Tokens: tokenStore,
		Secure: strings.HasPrefix(cfg.Issuer(), "https:"), Log: log,
		SignIn: console.SignInLimits{PerUser: cfg.Console.SignIn.PerUser, PerAddress: cfg.Console.SignIn.PerAddress,
			Window: cfg.Console.SignIn.Window, TrustedProxies: cfg.TrustedPrefixes()}})
	con.Mount(srv)
	agents, stopOAuth, err := mountOAuth(ctx, srv, cfg, db, con, log)
	if err != nil {
		return err
	}
	defer stopOAuth()
	mountSignIn(srv, db.Pool, cfg.Issuer(), index, tokenStore, con, agents, log)
	bh, stopBoxes := mountBoxes(ctx, srv, cfg, db, index, keys.Entries, log)
	defer stopBoxes()
	mountSession(srv, bh, index, bh.CallInterceptor(), log)
	mountKeys(srv, keys, pushKeys.to(bh), index, con, log)
	mountControlMCP(srv, bh, index, agents, log, cfg.Issuer(), cfg.OAuth.PublicURL)
	sg := mountSignup(ctx, srv, cfg, db.Pool, userStore, con, index, log)
	if err := mountGitHub(srv, cfg, db.Pool, con, sg, log); err != nil {
		return err
	}
	// Started once everything that follows its changes is mounted (OnChange).
	if err := index.Start(ctx); err != nil {
		return err
	}
	defer index.Stop()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("serving", "addr", ln.Addr().String(), "issuer", cfg.Issuer(), "state_dir", cfg.StateDir,
		"database", map[bool]string{true: "embedded", false: "database.url"}[cfg.Database.URL == ""], "ready_in", time.Since(start).Round(time.Millisecond))
	return srv.Serve(ctx, ln)
}
