// Package shares is the named shares of a box's screen (issue 43, Deliver
// 4; docs/screen.md, "Shares"): a link carrying a secret (cbs_ and 64
// hex, kept only as its SHA-256) that opens the box's screen on the share
// page without any sign-in, with take-over input or view-only (the api
// drops the viewer's input from the RFB stream: ViewOnly), until it
// expires or its owner revokes it. Revoking a share, and its owner's sign
// out everywhere, closes its open viewers at once; every open and close
// is in an audit log the owner reads.
//
// A share secret is no token: the token check refuses its prefix before
// any lookup (tokens.ErrShareSecret), so gRPC, the MCPs and the console
// answer it as a bad token (Contract: Flows, "a share secret is no gRPC
// token at the edge"; What a grant reaches, "Shares").
package shares

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (box_shares, box_share_events); they
// refer to users and boxes (boxes.Schema first).
var Schema = database.NewSchema("shares_schema_migrations", migrations, "migrations")

// SecretPrefix starts every share secret: cbs_ and 64 lowercase hex.
const SecretPrefix = "cbs_"

// SecretLen is a secret's length.
const SecretLen = len(SecretPrefix) + 64

// DefaultDays and MaxDays bound how long a link works.
const (
	DefaultDays = 7
	MaxDays     = 30
)

// Errors of the store.
var (
	ErrInvalid  = errors.New("invalid")
	ErrNotFound = errors.New("not found")
	// ErrNoShare is every reason a secret opens nothing: malformed,
	// guessed, expired, revoked, or its box deleted. One error, one
	// message, so the page leaks none of them.
	ErrNoShare = errors.New("this share link does not work: it may be mistyped, expired or revoked; ask its owner for a new one")
)

// Share is a stored share. BoxID is "" once its box is deleted.
type Share struct {
	ID        string
	UserID    string
	BoxID     string
	BoxName   string
	ViewOnly  bool
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt *time.Time
}

// Event is one line of the audit log: a viewer's open or close.
type Event struct {
	ShareID string
	Event   string // "open" or "close"
	At      time.Time
	Viewer  string
	Address string
	Reason  string
}

// Store keeps the shares in the api's database.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore is the store on pool; now is its clock (nil: time.Now), which
// decides expiry.
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

// Hash is what the store keeps of a secret.
func Hash(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Create makes a share of userID's box (its name or id) for days (0:
// DefaultDays; 1 to MaxDays) and answers it with its secret, which is
// shown once and never stored. ErrInvalid for days out of range,
// ErrNotFound for a box that is not the user's.
func (s *Store) Create(ctx context.Context, userID, box string, viewOnly bool, days int) (Share, string, error) {
	if days == 0 {
		days = DefaultDays
	}
	if days < 1 || days > MaxDays {
		return Share{}, "", fmt.Errorf("%w: days %d is not 1 to %d", ErrInvalid, days, MaxDays)
	}
	if box == "" {
		return Share{}, "", fmt.Errorf("%w: box: name the box to share", ErrInvalid)
	}
	sh := Share{ID: "sh-" + randomHex(8), UserID: userID, ViewOnly: viewOnly}
	err := s.pool.QueryRow(ctx, `SELECT id, name FROM boxes WHERE user_id = $1 AND (id = $2 OR name = $2)`, userID, box).Scan(&sh.BoxID, &sh.BoxName)
	if errors.Is(err, pgx.ErrNoRows) {
		return Share{}, "", fmt.Errorf("%w: no box %q of yours", ErrNotFound, box)
	}
	if err != nil {
		return Share{}, "", fmt.Errorf("find box %q: %w", box, err)
	}
	secret := SecretPrefix + randomHex(32)
	sum := Hash(secret)
	sh.CreatedAt = s.now().UTC().Truncate(time.Microsecond)
	sh.ExpiresAt = sh.CreatedAt.Add(time.Duration(days) * 24 * time.Hour)
	if _, err := s.pool.Exec(ctx, `INSERT INTO box_shares (id, user_id, box_id, box_name, secret_hash, view_only, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, sh.ID, userID, sh.BoxID, sh.BoxName, sum[:], viewOnly, sh.CreatedAt, sh.ExpiresAt); err != nil {
		return Share{}, "", fmt.Errorf("store the share: %w", err)
	}
	return sh, secret, nil
}

const columns = `id, user_id::text, coalesce(box_id, ''), box_name, view_only, created_at, expires_at, revoked_at`

func scan(row pgx.Row) (Share, error) {
	var sh Share
	err := row.Scan(&sh.ID, &sh.UserID, &sh.BoxID, &sh.BoxName, &sh.ViewOnly, &sh.CreatedAt, &sh.ExpiresAt, &sh.RevokedAt)
	return sh, err
}

// List answers userID's shares, newest first.
func (s *Store) List(ctx context.Context, userID string) ([]Share, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM box_shares WHERE user_id = $1 ORDER BY created_at DESC, id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list the shares: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Share, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list the shares: %w", err)
	}
	return list, nil
}

// Revoke marks userID's share id revoked (once: a second revoke keeps
// the first time), NOTIFYs Channel of it, and answers it. ErrNotFound for a share of another user
// or none.
func (s *Store) Revoke(ctx context.Context, userID, id string) (Share, error) {
	sh, err := scan(s.pool.QueryRow(ctx, `UPDATE box_shares SET revoked_at = coalesce(revoked_at, $3)
		WHERE id = $1 AND user_id::text = $2 RETURNING `+columns, id, userID, s.now().UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return Share{}, fmt.Errorf("%w: no share %q of yours", ErrNotFound, id)
	}
	if err != nil {
		return Share{}, fmt.Errorf("revoke share %s: %w", id, err)
	}
	// Every api ends its viewers of the share (Follow); this one's too.
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, sh.ID); err != nil {
		return Share{}, fmt.Errorf("tell the apis of share %s's revoke: %w", id, err)
	}
	return sh, nil
}

// Open answers the live share whose secret this is: ErrNoShare for
// anything else (malformed, unknown, expired, revoked, its box deleted),
// with no word of which.
func (s *Store) Open(ctx context.Context, secret string) (Share, error) {
	if !wellFormed(secret) {
		return Share{}, ErrNoShare
	}
	sum := Hash(secret)
	sh, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM box_shares WHERE secret_hash = $1`, sum[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return Share{}, ErrNoShare
	}
	if err != nil {
		return Share{}, fmt.Errorf("look the share up: %w", err)
	}
	if !sh.Live(s.now()) {
		return Share{}, ErrNoShare
	}
	return sh, nil
}

// Live says whether the share opens a screen at now: not revoked, not
// expired, its box not deleted.
func (sh Share) Live(now time.Time) bool {
	return sh.RevokedAt == nil && now.Before(sh.ExpiresAt) && sh.BoxID != ""
}

// Still says whether share id is still live (a viewer's check between
// its open and the registry's record of it).
func (s *Store) Still(ctx context.Context, id string) (bool, error) {
	sh, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM box_shares WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sh.Live(s.now()), nil
}

func wellFormed(secret string) bool {
	if len(secret) != SecretLen || secret[:len(SecretPrefix)] != SecretPrefix {
		return false
	}
	for _, c := range secret[len(SecretPrefix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Record adds an open or close of a viewer to the audit log.
func (s *Store) Record(ctx context.Context, e Event) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO box_share_events (share_id, viewer, event, at, address, reason) VALUES ($1, $2, $3, $4, $5, $6)`,
		e.ShareID, e.Viewer, e.Event, s.now().UTC(), e.Address, e.Reason); err != nil {
		return fmt.Errorf("record the share's %s: %w", e.Event, err)
	}
	return nil
}

// Log answers the audit log of userID's shares (only share id's with an
// id), newest first, at most 1000 lines. ErrNotFound for an id that is
// not a share of the user's.
func (s *Store) Log(ctx context.Context, userID, id string) ([]Event, error) {
	if id != "" {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM box_shares WHERE id = $1 AND user_id::text = $2`, id, userID).Scan(&n); err != nil {
			return nil, fmt.Errorf("read the share log: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: no share %q of yours", ErrNotFound, id)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT e.share_id, e.event, e.at, e.viewer, e.address, e.reason
		FROM box_share_events e JOIN box_shares s ON s.id = e.share_id
		WHERE s.user_id::text = $1 AND ($2 = '' OR s.id = $2) ORDER BY e.id DESC LIMIT 1000`, userID, id)
	if err != nil {
		return nil, fmt.Errorf("read the share log: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		return e, r.Scan(&e.ShareID, &e.Event, &e.At, &e.Viewer, &e.Address, &e.Reason)
	})
	if err != nil {
		return nil, fmt.Errorf("read the share log: %w", err)
	}
	return list, nil
}
