// Package agents is the user's side of OAuth for agents: each grant's caps
// and boxes (what the control MCP scopes an agent's calls to) and the
// console's Agents page, where the user sees, marks seen and revokes the
// grants they approved. The grants, tokens and consent are api/oauth's.
//
// Contract: OAuth for agents (MCP authorization 2025-11-25), "What a grant
// reaches" and "The user"; docs/oauth.md.
package agents

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/oauth"
)

// Caps scopes a grant's box operations: the boxes it created (oauth_boxes)
// and its caps, max_boxes such boxes and max_running of them starting,
// running or hibernating.
type Caps struct {
	pool *pgxpool.Pool
}

// NewCaps is the caps of the grants in pool (users, boxes and oauth
// migrated).
func NewCaps(pool *pgxpool.Pool) *Caps { return &Caps{pool: pool} }

// Boxes are the ids of the boxes grantID created that still exist.
func (c *Caps) Boxes(ctx context.Context, grantID string) (map[string]bool, error) {
	rows, err := c.pool.Query(ctx, `SELECT box_id FROM oauth_boxes WHERE grant_id = $1`, grantID)
	if err != nil {
		return nil, fmt.Errorf("read the boxes of grant %s: %w", grantID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the boxes of grant %s: %w", grantID, err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// Agent is the boxes.Agent of g's operations: Check holds each to g's
// caps and boxes inside the operation's transaction, after the owner's
// row lock (so two calls of one user are checked one after the other and
// a cap is never passed by a race); Inserted records a box g created in
// oauth_boxes in the create's transaction.
func (c *Caps) Agent(g *oauth.Grant) *boxes.Agent {
	return &boxes.Agent{
		GrantID: g.ID,
		Check: func(ctx context.Context, tx pgx.Tx, kind, boxID string) error {
			return check(ctx, tx, g.ID, kind, boxID)
		},
		Inserted: func(ctx context.Context, tx pgx.Tx, boxID string) error {
			if _, err := tx.Exec(ctx, `INSERT INTO oauth_boxes (box_id, grant_id) VALUES ($1, $2)`, boxID, g.ID); err != nil {
				return fmt.Errorf("record box %s as grant %s's: %w", boxID, g.ID, err)
			}
			return nil
		},
	}
}

// holding are the states that hold a grant's max_running, as the user's
// running limit counts them.
const holding = `('starting', 'running', 'hibernating')`

// check refuses an operation of kind on boxID ("" for a create) that the
// grant may not begin: the grant ended (revoked or expired since its
// token was checked), a box it did not create (as a box that does not
// exist: ErrNotFound), a create past max_boxes or max_running, an ensure
// that would start a box past max_running. The caps are read from the row,
// so the Agents page's view and this check agree.
func check(ctx context.Context, tx pgx.Tx, grantID, kind, boxID string) error {
	var maxBoxes, maxRunning, held, running int
	var mine, counted bool
	err := tx.QueryRow(ctx, `
SELECT g.max_boxes, g.max_running,
       (SELECT count(*) FROM oauth_boxes o WHERE o.grant_id = g.id),
       (SELECT count(*) FROM oauth_boxes o JOIN boxes b ON b.id = o.box_id
         WHERE o.grant_id = g.id AND b.state IN `+holding+` AND b.id <> $2),
       EXISTS (SELECT 1 FROM oauth_boxes o WHERE o.grant_id = g.id AND o.box_id = $2),
       EXISTS (SELECT 1 FROM boxes b WHERE b.id = $2 AND b.state IN `+holding+`)
  FROM oauth_grants g WHERE g.id = $1 AND g.revoked_at IS NULL AND g.expires_at > now()`, grantID, boxID).
		Scan(&maxBoxes, &maxRunning, &held, &running, &mine, &counted)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("this agent's grant has ended (revoked or expired); sign in again: %w", boxes.ErrState)
	}
	if err != nil {
		return fmt.Errorf("read grant %s's caps: %w", grantID, err)
	}
	if boxID != "" && !mine {
		return fmt.Errorf("box %q: %w", boxID, boxes.ErrNotFound)
	}
	switch {
	case boxID == "" && held >= maxBoxes:
		return fmt.Errorf("max_boxes: this agent holds %d boxes and its grant's max_boxes is %d; delete one of them first (box_delete): %w", held, maxBoxes, boxes.ErrLimit)
	case (boxID == "" || kind == "ensure" && !counted) && running >= maxRunning:
		return fmt.Errorf("max_running: this agent has %d boxes starting, running or hibernating and its grant's max_running is %d; hibernate one first (box_hibernate): %w", running, maxRunning, boxes.ErrLimit)
	}
	return nil
}
