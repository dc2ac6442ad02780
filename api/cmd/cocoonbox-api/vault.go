package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/vault"
)

// auditSweepEvery is how often the api deletes vault_audit rows past
// their 90 days.
const auditSweepEvery = time.Hour

// startVault reads the master key (secrets.master_key_file, or made under
// the state directory at the first start; a missing or short file refuses
// the start) and starts the audit sweeper until ctx ends. onChange is
// called with an owner after each change of their keys.
func startVault(ctx context.Context, cfg config.Config, db *database.DB, onChange func(owner string), log *slog.Logger) (*vault.Store, error) {
	path, create := cfg.MasterKeyFile()
	master, err := vault.LoadMasterKey(path, create)
	if err != nil {
		return nil, err
	}
	store := vault.NewStore(db.Pool, master, onChange)
	go store.RunSweeper(ctx, auditSweepEvery, func(err error) { log.Warn("vault: audit sweep", "err", err) })
	return store, nil
}

// mountKeys mounts cocoonbox.control.v1.Keys behind the token check and
// the console's Keys section. withoutKeys (may be nil) lists a user's
// boxes that get no keys.
func mountKeys(srv *server.Server, store *vault.Store, withoutKeys func(context.Context, string) ([]vault.BoxWithoutKeys, error),
	index *tokens.Index, con *console.Console, log *slog.Logger) {
	svc := vault.NewService(store, tokens.UserID, withoutKeys, log)
	path, h := controlv1connect.NewKeysHandler(svc, callOptions(index)...)
	srv.Handle(path, index.Guard(h))
	vault.NewConsole(svc, func(r *http.Request) (string, bool) {
		u, ok := con.Session(r)
		return u.ID, ok
	}, log).Mount(srv)
	con.AddSection(console.Section{Title: "Keys", Path: "/cb/keys", Blurb: "Your API keys, sealed: your boxes hold placeholders, and the value goes out on the key's own hosts only."})
}
