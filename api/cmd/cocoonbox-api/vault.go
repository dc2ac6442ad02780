package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/database"
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
