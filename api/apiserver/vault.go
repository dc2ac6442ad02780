package apiserver

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
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

// keysPush sends a change of a user's keys to the box service, once it
// is there (the vault starts before the boxes, which read it).
type keysPush struct{ svc atomic.Pointer[boxes.Service] }

func (p *keysPush) push(owner string) {
	if s := p.svc.Load(); s != nil {
		s.PushKeys(owner)
	}
}

// to hooks the box service of h up, and answers its list of the boxes
// that get no keys (nil without a box service).
func (p *keysPush) to(h *boxes.Handler) func(context.Context, string) ([]vault.BoxWithoutKeys, error) {
	svc, err := h.Service()
	if err != nil {
		return nil
	}
	p.svc.Store(svc)
	return func(ctx context.Context, owner string) ([]vault.BoxWithoutKeys, error) {
		bs, err := svc.WithoutKeys(ctx, owner)
		out := []vault.BoxWithoutKeys{}
		for _, b := range bs {
			out = append(out, vault.BoxWithoutKeys{Box: b.Name, Image: b.Image})
		}
		return out, err
	}
}

// mountKeys mounts cocoonbox.control.v1.Keys behind the token check and
// the console's Keys section. withoutKeys (may be nil) lists a user's
// boxes that get no keys.
func mountKeys(srv *server.Server, store *vault.Store, withoutKeys func(context.Context, string) ([]vault.BoxWithoutKeys, error),
	index *tokens.Index, con *console.Console, log *slog.Logger) {
	svc := vault.NewService(store, tokens.UserID, withoutKeys, log)
	path, h := controlv1connect.NewKeysHandler(svc, callOptions(index)...)
	srv.Handle(path, index.Guard(h))
	vault.NewConsole(svc, con.UserID, log).Mount(srv)
	con.AddSection(console.Section{Title: "Keys", Path: "/cb/keys", Blurb: "Your API keys, sealed: your boxes hold placeholders, and the value goes out on the key's own hosts only.", Page: &vault.Page})
}
