package apiserver

import (
	"context"
	"log/slog"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/vault"
)

// mountConnect mounts Connect when connect.public_url is set: the broker,
// cocoonbox.control.v1.Connectors behind the token check, the mode B
// door and the console's calls (Contract: Connect (design §16)), and
// the sweep of connect_audit (every auditSweepEvery, by the api's clock), and
// the LISTEN that brings other apis' answers, disconnects and sign outs
// everywhere here (connect.Channel). It answers the broker (nil with
// Connect off) and what stops it; an error is the outbound dialer's or
// the LISTEN's.
func mountConnect(srv *server.Server, cfg config.Config, up connect.UpstreamConfig, db *database.DB, keys *vault.Store,
	index *tokens.Index, con *console.Console, log *slog.Logger) (*connect.Broker, func(), error) {
	if cfg.Connect.PublicURL == "" {
		return nil, func() {}, nil
	}
	b, err := connect.New(db.Pool, keys, up)
	if err != nil {
		return nil, nil, err
	}
	path, h := controlv1connect.NewConnectorsHandler(connect.NewService(b, tokens.UserID, log), callOptions(index)...)
	srv.Handle(path, index.Guard(h))
	srv.Handle(connect.DoorPath, b.Door(index, log))
	connect.NewConsole(b, connect.Sessions{User: con.UserID, Live: con.SessionLive}, cfg.Connect.PublicURL, log).Mount(srv)
	con.AddSection(console.Section{Title: "Connect", Path: "/cb/connect", Page: &connect.Page,
		Blurb: "MCP servers your own agents use through cocoonbox, with a policy per tool; the keys stay sealed here."})
	ctx, stop := context.WithCancel(context.Background())
	followed, err := b.Follow(ctx, db.URL, log)
	if err != nil {
		stop()
		b.Close()
		return nil, nil, err
	}
	go b.RunSweeper(ctx, auditSweepEvery, func(err error) { log.Warn("connect: sweep", "err", err) })
	return b, func() { stop(); followed(); b.Close() }, nil
}
