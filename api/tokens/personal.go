package tokens

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// Store changes a user's personal token (cb_ + 64 hex; only its SHA-256
// is kept, in users.token_sha256) and tells every api's index.
type Store struct {
	pool  *pgxpool.Pool
	index *Index
}

// NewStore is the personal tokens' store; index is this api's, reloaded
// after each commit so the change holds here at once.
func NewStore(pool *pgxpool.Pool, index *Index) *Store { return &Store{pool: pool, index: index} }

// Personal is what the console shows of a personal token (never the token).
type Personal struct {
	Exists bool `json:"exists"`
	// CreatedAt is when it was made, nil without one; UsedAt its last use
	// (written at most every UseInterval), nil when never used.
	CreatedAt *time.Time `json:"created_at"`
	UsedAt    *time.Time `json:"used_at"`
}

// Personal answers whether userID has a personal token, and since when.
func (s *Store) Personal(ctx context.Context, userID string) (Personal, error) {
	var p Personal
	err := s.pool.QueryRow(ctx, "SELECT token_sha256 IS NOT NULL, token_created_at, token_used_at FROM users WHERE id = $1", userID).
		Scan(&p.Exists, &p.CreatedAt, &p.UsedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("%w: %s", users.ErrNotFound, userID)
	}
	if err != nil {
		return p, fmt.Errorf("personal token: %w", err)
	}
	return p, nil
}

// Regenerate makes userID a new personal token, replacing the old one at
// once on every api (the calls open on it end); device tokens stay. The
// secret is answered once and never stored.
func (s *Store) Regenerate(ctx context.Context, userID string) (Secret, error) {
	secret, sum := New()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE users SET token_sha256 = $2, token_created_at = now(), token_used_at = NULL WHERE id = $1", userID, sum[:])
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: %s", users.ErrNotFound, userID)
		}
		return users.Notify(ctx, tx, userID)
	})
	if err != nil {
		return "", fmt.Errorf("regenerate the personal token: %w", err)
	}
	return secret, s.reload(ctx, userID)
}

// Revoke revokes userID's personal token at once (done also when there is
// none); device tokens stay.
func (s *Store) Revoke(ctx context.Context, userID string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.RevokePersonal(ctx, tx, userID) })
	if err != nil {
		return err
	}
	return s.reload(ctx, userID)
}

// reload brings this api's index up to a change that committed. It runs
// whether or not the caller is still there: the change is made.
func (s *Store) reload(ctx context.Context, userID string) error {
	return s.index.Reload(context.WithoutCancel(ctx), userID)
}

// RevokePersonal revokes userID's personal token in tx, notifying every api
// on commit (sign out everywhere runs it in its own transaction).
func (s *Store) RevokePersonal(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, "UPDATE users SET token_sha256 = NULL, token_created_at = NULL, token_used_at = NULL WHERE id = $1", userID); err != nil {
		return fmt.Errorf("revoke the personal token: %w", err)
	}
	return users.Notify(ctx, tx, userID)
}
