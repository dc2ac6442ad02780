package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/oauth"
)

// Errors of the Agents page's calls.
var (
	// ErrNotFound: no live grant of the user by that id (another user's,
	// one revoked or expired, or none at all: the same answer).
	ErrNotFound = errors.New("no such agent")
	// ErrMalformed: the id is not a grant id (cbg_ and 24 hex digits).
	ErrMalformed = errors.New("malformed agent id: a grant id is cbg_ and 24 lowercase hex digits")
)

// grantID is a grant id's shape (oauth_grants.id).
var grantID = regexp.MustCompile(`^cbg_[0-9a-f]{24}$`)

// Agent is one live grant as the Agents page lists it.
type Agent struct {
	ID           string     `json:"id"`
	ClientID     string     `json:"client_id"`
	ClientName   string     `json:"client_name"`
	VerifiedHost string     `json:"verified_host"` // "" for a registered client: unverified
	ApprovedAt   time.Time  `json:"approved_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	LastUsedAt   *time.Time `json:"last_used_at"` // to the minute; null before its first use
	MaxBoxes     int        `json:"max_boxes"`
	MaxRunning   int        `json:"max_running"`
	// New marks a grant the user has not seen on the page yet.
	New   bool  `json:"new"`
	Boxes []Box `json:"boxes"` // the boxes it created, oldest first
}

// Box is a box a grant created.
type Box struct {
	BoxID string `json:"box_id"`
	Name  string `json:"name"`
	State string `json:"state"`
}

// Revoker ends a grant at once on every api (api/oauth's Grants): its
// tokens stop and the calls open under it end.
type Revoker interface {
	Revoke(ctx context.Context, userID, grantID string) error
}

// Store reads and changes a user's grants for the Agents page.
type Store struct {
	pool    *pgxpool.Pool
	revoker Revoker
}

// NewStore is the store of the grants in pool, revoked through revoker.
func NewStore(pool *pgxpool.Pool, revoker Revoker) *Store {
	return &Store{pool: pool, revoker: revoker}
}

// List answers userID's live grants (neither revoked nor expired), newest
// first, each with the boxes it created.
func (s *Store) List(ctx context.Context, userID string) ([]Agent, error) {
	rows, err := s.pool.Query(ctx, `
SELECT g.id, g.client_id, g.client_name, g.verified_host, g.created_at, g.expires_at,
       date_trunc('minute', g.last_used_at), g.max_boxes, g.max_running, g.seen_at IS NULL,
       coalesce(json_agg(json_build_object('box_id', b.id, 'name', b.name, 'state', b.state) ORDER BY b.created_at, b.id)
                FILTER (WHERE b.id IS NOT NULL), '[]')
  FROM oauth_grants g
  LEFT JOIN oauth_boxes o ON o.grant_id = g.id
  LEFT JOIN boxes b ON b.id = o.box_id
 WHERE g.user_id = $1::uuid AND g.revoked_at IS NULL AND g.expires_at > now()
 GROUP BY g.id
 ORDER BY g.created_at DESC, g.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list the agents of %s: %w", userID, err)
	}
	list := []Agent{}
	var a Agent
	var boxes []byte
	_, err = pgx.ForEachRow(rows, []any{&a.ID, &a.ClientID, &a.ClientName, &a.VerifiedHost, &a.ApprovedAt, &a.ExpiresAt,
		&a.LastUsedAt, &a.MaxBoxes, &a.MaxRunning, &a.New, &boxes}, func() error {
		a.Boxes = nil
		if err := json.Unmarshal(boxes, &a.Boxes); err != nil {
			return fmt.Errorf("the boxes of grant %s: %w", a.ID, err)
		}
		list = append(list, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the agents of %s: %w", userID, err)
	}
	return list, nil
}

// Unseen names userID's live grants not yet seen on the Agents page (the
// home page's notice), oldest first: each client's name and verified host.
func (s *Store) Unseen(ctx context.Context, userID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
SELECT CASE WHEN verified_host = '' THEN client_name ELSE client_name || ' (' || verified_host || ')' END
  FROM oauth_grants
 WHERE user_id = $1::uuid AND seen_at IS NULL AND revoked_at IS NULL AND expires_at > now()
 ORDER BY created_at, id`, userID)
	if err != nil {
		return nil, fmt.Errorf("read the unseen agents of %s: %w", userID, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Seen marks every grant of userID seen: the page is open.
func (s *Store) Seen(ctx context.Context, userID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE oauth_grants SET seen_at = now() WHERE user_id = $1::uuid AND seen_at IS NULL`, userID); err != nil {
		return fmt.Errorf("mark the agents of %s seen: %w", userID, err)
	}
	return nil
}

// Revoke ends userID's live grant id at once on every api: its tokens
// stop, its open MCP exchanges end, its boxes stay the user's. Errors:
// ErrMalformed, ErrNotFound (another user's, an ended one, none).
func (s *Store) Revoke(ctx context.Context, userID, id string) error {
	if !grantID.MatchString(id) {
		return ErrMalformed
	}
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_grants WHERE id = $1 AND user_id = $2::uuid
	   AND revoked_at IS NULL AND expires_at > now())`, id, userID).Scan(&live)
	if err != nil {
		return fmt.Errorf("revoke agent %s: %w", id, err)
	}
	if !live {
		return fmt.Errorf("agent %s: %w", id, ErrNotFound)
	}
	return s.revoker.Revoke(ctx, userID, id)
}

// EndAll revokes every grant of userID in tx, and tells every api when tx
// commits: sign out everywhere ends the agents too.
//
// Contract: OAuth for agents, the user ("sign out everywhere ends every
// grant too", issue 27).
func EndAll(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = now() WHERE user_id = $1::uuid AND revoked_at IS NULL`, userID); err != nil {
		return fmt.Errorf("revoke the agents of %s: %w", userID, err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, oauth.Channel, userID); err != nil {
		return fmt.Errorf("notify %s: %w", oauth.Channel, err)
	}
	return nil
}

// notice is the home page's line naming the unseen grants ("" for none).
func notice(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "A new agent can use your account: " + names[0] + ". Review it on the Agents page."
	}
	return fmt.Sprintf("%d new agents can use your account: %s. Review them on the Agents page.", len(names), strings.Join(names, ", "))
}
