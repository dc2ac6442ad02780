package apiserver

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/state"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/api/vault"
)

// openState opens the state store state.store names: the embedded one
// under state_dir/state, whose presigned URLs this api serves (at
// store.PresignPath; the handler bounds its bodies itself, a chunk being
// larger than a call's body), or the S3 bucket of state.s3. An error
// refuses the start: saves with nowhere to go are no api to serve. A
// presigned PUT's body must arrive within http.read_timeout.
func openState(ctx context.Context, srv *server.Server, cfg config.Config, log *slog.Logger) (store.Store, error) {
	var st store.Store
	switch cfg.State.Store {
	case "s3":
		c := cfg.State.S3
		s3, err := store.OpenS3(ctx, store.S3Config{Endpoint: c.Endpoint, Bucket: c.Bucket, Region: c.Region,
			VirtualHosted: c.URLStyle == "virtual", CredentialsFile: c.CredentialsFile, Profile: c.Profile, CAFile: c.CAFile})
		if err != nil {
			return nil, err
		}
		st = s3
	default:
		d, err := store.OpenDir(filepath.Join(cfg.StateDir, "state"), cfg.Issuer(), nil)
		if err != nil {
			return nil, err
		}
		srv.HandleStream(store.PresignPath, d.Handler(cfg.HTTP.ReadTimeout))
		st = d
	}
	log.Info("state: the store", "store", st.String())
	return st, nil
}

// boxState is where box saves go beside the supervisors' disks: the
// state store, each user's objects sealed under the state key the vault
// keeps for them (docs/state.md, "Box saves").
func boxState(st store.Store, v *vault.Store) *boxes.State {
	return &boxes.State{Store: st, Keys: func(ctx context.Context, userID string) (*objects.Keys, error) {
		key, err := v.StateKey(ctx, userID)
		if err != nil {
			return nil, err
		}
		return objects.NewKeys(userID, key)
	}}
}

// startStateGC runs the state store's retention and GC (state.retention,
// state.gc_every; docs/state.md, "Retention and the GC") until ctx ends,
// and has every box save kick a pass of its user, whose new snapshot may
// have pushed a box name past state.retention.keep.
func startStateGC(ctx context.Context, cfg config.Config, db *database.DB, st store.Store, saves *boxes.State,
	now func() time.Time, log *slog.Logger) *state.Collector {
	gc := state.NewCollector(state.CollectorOptions{Pool: db.Pool, Store: st, Keys: saves.Keys,
		Retention: state.Retention{Keep: cfg.State.Retention.Keep, MaxAge: cfg.State.Retention.MaxAge}, Log: log, Now: now})
	saves.Saved = gc.Kick
	go gc.Run(ctx, cfg.State.GCEvery)
	return gc
}
