package apiserver

import (
	"context"
	"log/slog"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/signin"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/state"
	"github.com/cocoonbox/cocoonbox/api/usage"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/api/vault"
	"github.com/cocoonbox/cocoonbox/api/wake"
)

// Schemas are every package's migrations, in the order their tables refer to each other.
var Schemas = []database.Schema{users.Schema, console.Schema, ratelimit.Schema, signin.Schema, boxes.Schema, vault.Schema, oauth.Schema, signup.Schema, state.Schema, connect.Schema, usage.Schema, wake.Schema, shares.Schema}

// OpenDB opens and migrates the configured database. shared: an admin
// command beside a serving api uses that api's embedded cluster.
func OpenDB(ctx context.Context, cfg config.Config, log *slog.Logger, shared bool) (*database.DB, error) {
	db, err := database.Open(ctx, database.Options{
		URL: cfg.Database.URL, StateDir: cfg.StateDir, SystemUser: cfg.Database.SystemUser,
		MaxConns: cfg.Database.MaxConns, Shared: shared, Log: log,
	})
	if err != nil {
		return nil, err
	}
	if err := database.Migrate(ctx, db.Pool, Schemas...); err != nil {
		db.Close(ctx)
		return nil, err
	}
	return db, nil
}
