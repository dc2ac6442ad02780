package state

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The per-user state lock (docs/state.md, "Retention and the GC"): a
// PostgreSQL transaction advisory lock, so it holds across every api
// replica sharing the database and is let go when its holder's
// transaction or session ends, an api that dies included. Whatever reads
// the store's chunks to decide what to skip, or reads a snapshot's
// manifests and chunks, holds it shared (Shared): box saves, restores,
// browsing. The GC holds it exclusive (exclusive) while it applies
// retention and deletes chunks, so no save can decide that a chunk exists
// and then find it gone when its manifest names it.

// ErrBusy is a user whose state lock the GC did not get within its wait:
// a save or restore held it throughout. The user is left for the next pass.
var ErrBusy = errors.New("a save or restore holds the user's state lock")

// lockKey is uid's advisory lock key: the first 8 bytes of a SHA-256 of a
// label of this package, so other packages' keys do not meet it.
func lockKey(uid string) int64 {
	sum := sha256.Sum256([]byte("cocoonbox state user " + uid))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Shared runs fn holding uid's state lock shared: any number of saves and
// restores of one user run at once, and the GC waits for them all. It
// waits while the GC holds the lock (a pass of one user: its manifests
// listed and opened, its unreferenced chunks deleted). fn's error is
// Shared's; a lock that cannot be taken is an error naming it, fn not run.
func Shared(ctx context.Context, pool *pgxpool.Pool, uid string, fn func(ctx context.Context) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("the state lock of %s: %w", uid, err)
	}
	// Rolled back when fn returns: the lock goes with the transaction.
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was written
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", lockKey(uid)); err != nil {
		return fmt.Errorf("the state lock of %s: %w", uid, err)
	}
	return fn(ctx)
}

// exclusive runs fn holding uid's state lock exclusive, waiting at most
// wait for the saves and restores holding it shared (ErrBusy past that,
// fn not run). While it waits, a new Shared of that user waits behind it
// (PostgreSQL grants locks in order), so a save is held up by wait at
// most plus fn's pass.
func exclusive(ctx context.Context, pool *pgxpool.Pool, uid string, wait time.Duration, fn func(ctx context.Context) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("the state lock of %s: %w", uid, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was written
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', $1, true)", fmt.Sprintf("%dms", max(wait.Milliseconds(), 1))); err != nil {
		return fmt.Errorf("the state lock of %s: %w", uid, err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(uid)); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available: lock_timeout passed
			return fmt.Errorf("user %s: %w", uid, ErrBusy)
		}
		return fmt.Errorf("the state lock of %s: %w", uid, err)
	}
	// The pass may take long: its own statements must not time out on
	// the lock setting meant for the wait.
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', '0', true)"); err != nil {
		return fmt.Errorf("the state lock of %s: %w", uid, err)
	}
	return fn(ctx)
}
