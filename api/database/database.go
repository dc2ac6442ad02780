// Package database gives the api its PostgreSQL: a configured server
// (database.url, shared by several apis) or the embedded cluster under the
// state directory, a pgx pool on it, and each package's goose migrations.
package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options say which PostgreSQL to open and how.
type Options struct {
	// URL of a PostgreSQL server; empty for the embedded cluster under StateDir/postgres.
	URL      string
	StateDir string
	// SystemUser runs the embedded cluster when the api is root.
	SystemUser string
	MaxConns   int
	// Shared lets an admin command use the cluster of an api already serving
	// StateDir instead of refusing; the serving api keeps owning it.
	Shared bool
	// Tracer sees every query (tests count them).
	Tracer pgx.QueryTracer
	Log    *slog.Logger
}

// DB is an open database: a pool, its URL (for LISTEN connections and
// tools), and the embedded cluster when this process started it.
type DB struct {
	Pool *pgxpool.Pool
	URL  string

	cluster *Cluster
	unlock  func()
}

// Open opens the database Options name. Without a URL it takes the state
// directory's lock and starts the embedded cluster (see Cluster.Start); a
// second api on the same state directory gets an error wrapping ErrLocked,
// unless Shared, which connects to the serving api's cluster. Either waits
// up to AdminWait for an admin command holding the lock (it stops the
// cluster it started when it ends), then takes the lock.
func Open(ctx context.Context, o Options) (*DB, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	db := &DB{URL: o.URL}
	if o.URL == "" {
		role := RoleServe
		if o.Shared {
			role = RoleAdmin
		}
		unlock, err := lockAfterAdmins(ctx, o.StateDir, role)
		c := &Cluster{Dir: filepath.Join(o.StateDir, "postgres"), User: o.SystemUser, Log: o.Log}
		db.URL = c.URL()
		switch {
		case err == nil:
			db.unlock = unlock
			if err := c.Start(ctx); err != nil {
				unlock()
				return nil, err
			}
			db.cluster = c
		case errors.Is(err, ErrLocked) && o.Shared:
			// The serving api owns the cluster; this process only connects.
		default:
			return nil, err
		}
	}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		db.Close(ctx)
		return nil, errors.New("database: the URL is not a PostgreSQL URL")
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = int32(o.MaxConns)
	}
	cfg.ConnConfig.Tracer = o.Tracer
	db.Pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = db.Pool.Ping(ctx)
	}
	if err != nil {
		db.Close(ctx)
		return nil, fmt.Errorf("database: connect to %s: %w", redact(db.URL), err)
	}
	return db, nil
}

// AdminWait bounds how long Open waits for an admin command holding the
// state directory (two `cocoonbox-api users` at once, or serve just after
// one): an admin command takes a second or two.
const AdminWait = time.Minute

// lockAfterAdmins is Lock, tried again every 50 ms while an admin command
// holds the lock, for up to AdminWait; a serving api's lock is answered
// at once.
func lockAfterAdmins(ctx context.Context, dir, role string) (func(), error) {
	deadline := time.Now().Add(AdminWait)
	for {
		unlock, err := Lock(dir, role)
		var held *LockedError
		if !errors.As(err, &held) || held.Role != RoleAdmin || time.Now().After(deadline) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waiting for it: %w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close closes the pool and stops the embedded cluster when this process started it.
func (db *DB) Close(ctx context.Context) error {
	if db.Pool != nil {
		db.Pool.Close()
	}
	var err error
	if db.cluster != nil {
		err = db.cluster.Stop(context.WithoutCancel(ctx))
	}
	if db.unlock != nil {
		db.unlock()
	}
	return err
}

// redact drops a URL's password so an error never prints it.
func redact(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return "the configured database"
	}
	host := cfg.Host
	return fmt.Sprintf("%s@%s/%s", cfg.User, host, cfg.Database)
}
