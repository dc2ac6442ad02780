package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the signin package's migrations (signin_schema_migrations); its
// table refers to users, so it migrates after users.Schema.
var Schema = database.NewSchema("signin_schema_migrations", migrations, "migrations")

// CodeLifetime is how long an authorization code can be exchanged (the contract's 60 s).
const CodeLifetime = 60 * time.Second

// Devices is what the sign-in needs of the device tokens (package tokens):
// it makes one in the exchange's transaction, and revokes one.
type Devices interface {
	// CreateDevice stores a new device token of userID for client, named
	// label, in tx, and answers its id (dev_ + 16 hex) and secret (cb_ + 64
	// hex). Every api learns it once tx commits.
	CreateDevice(ctx context.Context, tx pgx.Tx, userID, client, label string) (id, secret string, err error)
	// RevokeDevice revokes userID's device id in tx; every api drops it and
	// ends the calls open on it once tx commits. A device already gone is no error.
	RevokeDevice(ctx context.Context, tx pgx.Tx, userID, id string) error
}

// Store keeps the one-use authorization codes.
type Store struct {
	pool    *pgxpool.Pool
	devices Devices
	reload  func(ctx context.Context, userID string) error
	// Lifetime is CodeLifetime; tests shorten it.
	Lifetime time.Duration
}

// NewStore is a store on pool making device tokens through devices. reload
// makes this api's token index agree with the database for a user at once,
// so a token answered here works here on its first call (the other apis
// learn it from the NOTIFY).
func NewStore(pool *pgxpool.Pool, devices Devices, reload func(ctx context.Context, userID string) error) *Store {
	return &Store{pool: pool, devices: devices, reload: reload, Lifetime: CodeLifetime}
}

func hashCode(code string) []byte {
	sum := sha256.Sum256([]byte(code))
	return sum[:]
}

// IssueCode stores a code for userID's approval of r and answers it (cbc_ and
// 26 base32 characters, 130 random bits); only its SHA-256 is kept. Codes
// that expired an hour ago are removed on the way.
func (s *Store) IssueCode(ctx context.Context, userID string, r *client.AuthorizeRequest) (string, error) {
	code := "cbc_" + rand.Text()
	_, err := s.pool.Exec(ctx, `
		WITH gone AS (DELETE FROM signin_codes WHERE expires_at < now() - interval '1 hour')
		INSERT INTO signin_codes (code_sha256, user_id, client, redirect_uri, code_challenge, device_name, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))`,
		hashCode(code), userID, r.Client.ID, r.RedirectURI, r.CodeChallenge, r.DeviceName, s.Lifetime.Seconds())
	if err != nil {
		return "", fmt.Errorf("store the authorization code: %w", err)
	}
	return code, nil
}

// Exchange is a token request's grant (RFC 6749 §4.1.3): the form's
// client_id, code (cbc_ + 26 base32), redirect_uri (exactly the one the
// code was approved for) and code_verifier (RFC 7636 §4.5).
type Exchange struct {
	ClientID, Code, RedirectURI, Verifier string
}

// Redeem turns a code into a device token of its user, in one transaction.
// The first attempt burns the code whatever its outcome, so a code works once;
// a second use is invalid_grant and revokes the device the first use made
// (RFC 6749 §4.1.2). invalid_grant also for an unknown or expired code, a
// client or redirect URI other than the approval's, a verifier that does not
// match (RFC 7636 §4.6), and a user disabled meanwhile. Other errors are
// server errors.
func (s *Store) Redeem(ctx context.Context, x Exchange) (secret string, oauthErr *Error, err error) {
	var changed string // the user whose tokens the transaction changed
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			userID, clientID, redirectURI, challenge, label string
			deviceID                                        *string
			used, expired, disabled                         bool
		)
		err := tx.QueryRow(ctx, `
			SELECT c.user_id, c.client, c.redirect_uri, c.code_challenge, c.device_name, c.device_id,
			       c.used_at IS NOT NULL, c.expires_at <= now(), u.disabled_at IS NOT NULL
			FROM signin_codes c JOIN users u ON u.id = c.user_id
			WHERE c.code_sha256 = $1 FOR UPDATE OF c`, hashCode(x.Code)).
			Scan(&userID, &clientID, &redirectURI, &challenge, &label, &deviceID, &used, &expired, &disabled)
		if errors.Is(err, pgx.ErrNoRows) {
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "the code is unknown: sign in again"}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the authorization code: %w", err)
		}
		if used {
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "the code was used already; the device it signed in is revoked: sign in again"}
			if deviceID != nil {
				changed = userID
				return s.devices.RevokeDevice(ctx, tx, userID, *deviceID)
			}
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE signin_codes SET used_at = now() WHERE code_sha256 = $1`, hashCode(x.Code)); err != nil {
			return fmt.Errorf("burn the authorization code: %w", err)
		}
		switch {
		case expired:
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "the code expired (it lives 60 s): sign in again"}
		case clientID != x.ClientID:
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "the code was issued to another client"}
		case redirectURI != x.RedirectURI:
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "redirect_uri is not the one of the authorization request"}
		case VerifyPKCE(challenge, x.Verifier) != nil:
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "code_verifier does not match the code_challenge"}
		case disabled:
			oauthErr = &Error{Code: client.ErrInvalidGrant, Description: "the account is disabled"}
		}
		if oauthErr != nil {
			return nil
		}
		id, sec, err := s.devices.CreateDevice(ctx, tx, userID, clientID, label)
		if err != nil {
			return fmt.Errorf("make the device token: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE signin_codes SET device_id = $2 WHERE code_sha256 = $1`, hashCode(x.Code), id); err != nil {
			return fmt.Errorf("record the code's device: %w", err)
		}
		secret, changed = sec, userID
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	if changed != "" {
		if err := s.reload(ctx, changed); err != nil {
			return "", nil, fmt.Errorf("reload the token index: %w", err)
		}
	}
	return secret, oauthErr, nil
}
