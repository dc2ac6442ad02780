package devices

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// newToken makes a device token: its id (dev_ + 16 hex) and its secret
// (cb_ + 64 hex, the personal token's shape), of which only the SHA-256 is stored.
func newToken() (id, secret string, sum [32]byte) {
	var idb [8]byte
	var sec [32]byte
	rand.Read(idb[:])
	rand.Read(sec[:])
	secret = "cb_" + hex.EncodeToString(sec[:])
	return "dev_" + hex.EncodeToString(idb[:]), secret, sha256.Sum256([]byte(secret))
}

// InTx is the device tokens' changes that run inside another package's
// transaction (the sign-in's code exchange); every api learns of them on commit.
type InTx struct{}

// CreateDevice stores a new device token of userID for client, named label,
// and answers its id (dev_ + 16 hex) and secret (cb_ + 64 hex; only its
// SHA-256 is stored).
func (InTx) CreateDevice(ctx context.Context, tx pgx.Tx, userID, client, label string) (string, string, error) {
	id, secret, sum := newToken()
	if _, err := tx.Exec(ctx, `INSERT INTO user_tokens (id, user_id, sha256, client, label) VALUES ($1, $2, $3, $4, $5)`,
		id, userID, sum[:], client, label); err != nil {
		return "", "", fmt.Errorf("store device token: %w", err)
	}
	return id, secret, users.Notify(ctx, tx, userID)
}

// RevokeDevice revokes userID's device id; one already gone is no error.
func (InTx) RevokeDevice(ctx context.Context, tx pgx.Tx, userID, id string) error {
	if err := RevokeInTx(ctx, tx, userID, id); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// RevokeSecret revokes the device token whose secret this is (RFC 7009's
// revoke of the sign-in). An unknown token, or the personal token, is left
// alone with no error.
func (s *Store) RevokeSecret(ctx context.Context, secret string) error {
	sum := sha256.Sum256([]byte(secret))
	var userID string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `DELETE FROM user_tokens WHERE sha256 = $1 RETURNING user_id`, sum[:]).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("revoke a device token: %w", err)
		}
		return users.Notify(ctx, tx, userID)
	})
	if err != nil || userID == "" {
		return err
	}
	return s.after(ctx, userID)
}
