package signup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// InvitePrefix starts an invite code: cbi_ and 64 hex.
const InvitePrefix = "cbi_"

// The ranges of an invite (Contract: "POST /cb/api/invites {uses 1..1000,
// days 1..90}"; an invite-scoped token's: one use, days 1 to 7, default 2).
const (
	MaxInviteUses       = 1000
	MaxInviteDays       = 90
	MaxTokenInviteDays  = 7
	DefaultTokenInvDays = 2
)

// Invite is an invite as listed (never its code).
type Invite struct {
	ID        string     `json:"id"`
	Uses      int        `json:"uses"`
	Used      int        `json:"used"`
	CreatedBy string     `json:"created_by"` // the admin's name; "" when the admin is gone
	TokenID   string     `json:"token_id,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Status is live, used_up, expired or revoked.
	Status string `json:"status"`
}

// NewInvite is a created invite: the code, given once, and its link.
type NewInvite struct {
	Invite
	Code string `json:"code"`
	Link string `json:"link"`
}

func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func newSecret(prefix string) (string, [32]byte) {
	var b [32]byte
	rand.Read(b[:])
	s := prefix + hex.EncodeToString(b[:])
	return s, sha256.Sum256([]byte(s))
}

// CreateInvite stores an invite of uses and days made by the admin
// adminID, through the invite-scoped token tokenID ("" for the console),
// and answers its code once.
func (s *Signup) CreateInvite(ctx context.Context, adminID, tokenID string, uses, days int) (NewInvite, error) {
	if uses < 1 || uses > MaxInviteUses {
		return NewInvite{}, fmt.Errorf("%w: uses is 1 to %d, not %d", ErrInvalid, MaxInviteUses, uses)
	}
	if days < 1 || days > MaxInviteDays {
		return NewInvite{}, fmt.Errorf("%w: days is 1 to %d, not %d", ErrInvalid, MaxInviteDays, days)
	}
	code, sum := newSecret(InvitePrefix)
	var tok, admin *string
	if tokenID != "" {
		tok = &tokenID
	}
	if adminID != "" {
		admin = &adminID
	}
	var id string
	err := s.pool.QueryRow(ctx, `INSERT INTO invites (code_sha256, uses, created_by, token_id, expires_at)
		VALUES ($1, $2, $3, $4, now() + make_interval(days => $5)) RETURNING id`, sum[:], uses, admin, tok, days).Scan(&id)
	if err != nil {
		return NewInvite{}, fmt.Errorf("store the invite: %w", err)
	}
	list, err := s.invites(ctx, "WHERE i.id::text = $1", id)
	if err != nil || len(list) != 1 {
		return NewInvite{}, fmt.Errorf("read the invite back: %w", err)
	}
	s.log.InfoContext(ctx, "signup: invite made", "invite", id, "admin", adminID, "invite_token", tokenID, "uses", uses, "days", days)
	return NewInvite{Invite: list[0], Code: code, Link: "/cb/?invite=" + code}, nil
}

// Invites lists the invites, newest first: every one (tokenID ""), or
// those the invite-scoped token tokenID made.
func (s *Signup) Invites(ctx context.Context, tokenID string) ([]Invite, error) {
	if tokenID == "" {
		return s.invites(ctx, "")
	}
	return s.invites(ctx, "WHERE i.token_id = $1", tokenID)
}

func (s *Signup) invites(ctx context.Context, where string, args ...any) ([]Invite, error) {
	rows, err := s.pool.Query(ctx, `SELECT i.id::text, i.uses, i.used, coalesce(u.name, ''), coalesce(i.token_id, ''), i.created_at, i.expires_at, i.revoked_at,
		CASE WHEN i.revoked_at IS NOT NULL THEN 'revoked' WHEN i.used >= i.uses THEN 'used_up' WHEN i.expires_at <= now() THEN 'expired' ELSE 'live' END
		FROM invites i LEFT JOIN users u ON u.id = i.created_by `+where+` ORDER BY i.created_at DESC, i.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Invite, error) {
		var i Invite
		err := r.Scan(&i.ID, &i.Uses, &i.Used, &i.CreatedBy, &i.TokenID, &i.CreatedAt, &i.ExpiresAt, &i.RevokedAt, &i.Status)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	if list == nil {
		list = []Invite{}
	}
	return list, nil
}

// RevokeInvite revokes an invite; ErrNotFound for an unknown id. A
// revoked one stays revoked.
func (s *Signup) RevokeInvite(ctx context.Context, id string) error {
	if !uuidRule.MatchString(id) {
		// Not an invite's id (a NUL or bad UTF-8 in it was a 500).
		return fmt.Errorf("%w: invite %q", ErrNotFound, id)
	}
	tag, err := s.pool.Exec(ctx, "UPDATE invites SET revoked_at = coalesce(revoked_at, now()) WHERE id::text = $1", id)
	if err != nil {
		return fmt.Errorf("revoke invite %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: invite %q", ErrNotFound, id)
	}
	return nil
}

// ErrNoInvite: the code is no usable invite (malformed, unknown, revoked,
// used up or expired); which one is not told.
var ErrNoInvite = errors.New("no usable invite")

// useInvite takes one use of the invite code in tx, answering its id.
func useInvite(ctx context.Context, tx pgx.Tx, code string) (string, error) {
	if !client.IsInviteCode(code) {
		return "", ErrNoInvite
	}
	sum := sha256.Sum256([]byte(code))
	var id string
	err := tx.QueryRow(ctx, `UPDATE invites SET used = used + 1
		WHERE code_sha256 = $1 AND revoked_at IS NULL AND expires_at > now() AND used < uses RETURNING id::text`, sum[:]).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNoInvite
	}
	if err != nil {
		return "", fmt.Errorf("use the invite: %w", err)
	}
	return id, nil
}
