// Package state is the api's state layer (docs/state.md): the store
// (state/store), the format of a save's objects (state/objects), saving
// and restoring a tree (state/snapshot). This package ties it to the
// users: a deleted user's objects leave the store (Sweeper).
package state

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (state_deleted_users, kept by a
// trigger on users); it refers to users (users.Schema first).
var Schema = database.NewSchema("state_schema_migrations", migrations, "migrations")

// Sweeper removes <uid>/ from the store for every user deleted: the
// trigger on users keeps their ids, and a user's row in
// state_deleted_users goes only once the store has removed all of it, so
// an api that dies midway leaves the rest to the next sweep, its own or
// another replica's (DeleteUser is idempotent).
type Sweeper struct {
	pool  *pgxpool.Pool
	store store.Store
	log   *slog.Logger
}

// NewSweeper is the sweeper of st, on pool.
func NewSweeper(pool *pgxpool.Pool, st store.Store, log *slog.Logger) *Sweeper {
	return &Sweeper{pool: pool, store: st, log: log}
}

// Sweep removes the objects of every deleted user it finds, and answers
// how many users it cleared. A user the store fails for stays for the
// next sweep; the error names them.
func (s *Sweeper) Sweep(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, "SELECT user_id::text FROM state_deleted_users ORDER BY deleted_at LIMIT 100")
	if err != nil {
		return 0, fmt.Errorf("list deleted users: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if err := s.store.DeleteUser(ctx, id); err != nil {
			return n, fmt.Errorf("remove deleted user %s from %s: %w", id, s.store, err)
		}
		if _, err := s.pool.Exec(ctx, "DELETE FROM state_deleted_users WHERE user_id = $1", id); err != nil {
			return n, fmt.Errorf("forget deleted user %s: %w", id, err)
		}
		s.log.Info("state: removed a deleted user's objects", "user", id, "store", s.store.String())
		n++
	}
	return n, nil
}

// Run sweeps every every (and once at once) until ctx ends.
func (s *Sweeper) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("state: sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
