package connect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ApprovalTimeout is how long a call of an ask tool waits for the user's
// answer before it is answered as denied.
const ApprovalTimeout = 5 * time.Minute

// Decision is the user's answer to a pending approval (Contract: Connect,
// Console calls).
type Decision string

// The decisions: once lets this call through, always sets the tool's
// policy to allow and lets it through, deny refuses it.
const (
	DecisionOnce   Decision = "once"
	DecisionAlways Decision = "always"
	DecisionDeny   Decision = "deny"
)

// Approval is a call of an ask tool waiting for the user, on any api of
// the database (a row of connect_approvals).
type Approval struct {
	ID        string    `json:"id"`
	Connector string    `json:"connector"`
	Tool      string    `json:"tool"`
	Door      string    `json:"door"`
	Created   time.Time `json:"created"`
}

// approvals are the calls waiting on this api for their answer, by
// approval id. The approvals themselves are rows of connect_approvals, so
// that the console of any api lists and answers them; an answer reaches
// the api the call waits on through Channel (Follow, deliver).
type approvals struct {
	mu      sync.Mutex
	waiting map[string]chan Decision
}

// pendingAge is the SQL condition of a row still waited on: younger than
// ApprovalTimeout by the database's clock, which every api shares.
var pendingAge = fmt.Sprintf("created_at > now() - make_interval(secs => %d)", int(ApprovalTimeout/time.Second))

// await stores an approval of user's call of tool of c through door
// (DoorMCP, DoorBox) and waits for its answer; ctx's end or ApprovalTimeout answer "" (unanswered, refused as
// a deny is, audited as approval_required). The row goes when it ends.
// An error is the database's, before any wait.
func (b *Broker) await(ctx context.Context, user, door string, c Connector, tool string) (Decision, error) {
	var raw [16]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	answer := make(chan Decision, 1)
	a := &b.pending
	a.mu.Lock() // before the row exists, so no answer comes before it
	if a.waiting == nil {
		a.waiting = map[string]chan Decision{}
	}
	a.waiting[id] = answer
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.waiting, id)
		a.mu.Unlock()
		// Gone from every console: the call no longer waits.
		b.pool.Exec(context.WithoutCancel(ctx), "DELETE FROM connect_approvals WHERE id = $1", id)
	}()
	if _, err := b.pool.Exec(ctx, "INSERT INTO connect_approvals (id, user_id, connector, tool, door) VALUES ($1, $2, $3, $4, $5)",
		id, user, c.ID, tool, door); err != nil {
		return "", fmt.Errorf("store the approval: %w", err)
	}
	t := time.NewTimer(ApprovalTimeout)
	defer t.Stop()
	select {
	case d := <-answer:
		return d, nil
	case <-ctx.Done():
	case <-t.C:
	}
	return "", nil
}

// deliver hands approval id's answer, once its row has one, to its call
// if that waits on this api (a notification on Channel, or this api's own
// Answer).
func (b *Broker) deliver(ctx context.Context, id string) error {
	b.pending.mu.Lock()
	answer := b.pending.waiting[id]
	b.pending.mu.Unlock()
	if answer == nil {
		return nil
	}
	var d *string
	err := b.pool.QueryRow(ctx, "SELECT decision FROM connect_approvals WHERE id = $1", id).Scan(&d)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && d == nil {
		return nil
	}
	if err != nil {
		return err
	}
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	if b.pending.waiting[id] == answer {
		delete(b.pending.waiting, id)
		answer <- Decision(*d)
	}
	return nil
}

// waitingIDs are the approvals waiting on this api.
func (b *Broker) waitingIDs() []string {
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	ids := make([]string, 0, len(b.pending.waiting))
	for id := range b.pending.waiting {
		ids = append(ids, id)
	}
	return ids
}

// Pending answers user's pending approvals on every api of the database,
// oldest first.
func (b *Broker) Pending(ctx context.Context, user string) ([]Approval, error) {
	rows, err := b.pool.Query(ctx, `SELECT id, connector, tool, door, created_at FROM connect_approvals
		WHERE user_id = $1 AND decision IS NULL AND `+pendingAge+` ORDER BY created_at, id`, user)
	if err != nil {
		return nil, fmt.Errorf("the pending approvals: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Approval])
	if err != nil {
		return nil, fmt.Errorf("the pending approvals: %w", err)
	}
	return out, nil
}

// Answer answers one of user's pending approvals, on whichever api its
// call waits: the row takes the decision and Channel tells that api.
// Another user's, an answered or an unknown one is ErrNotFound, a
// decision other than once, always or deny an *InputError.
func (b *Broker) Answer(ctx context.Context, user, id string, d Decision) error {
	if d != DecisionOnce && d != DecisionAlways && d != DecisionDeny {
		return &InputError{"decision", fmt.Sprintf("%q is not once, always or deny", d)}
	}
	tag, err := b.pool.Exec(ctx, `WITH a AS (UPDATE connect_approvals SET decision = $3
			WHERE id = $1 AND user_id::text = $2 AND decision IS NULL AND `+pendingAge+` RETURNING id)
		SELECT pg_notify($4, 'approval:' || id) FROM a`, id, user, string(d), Channel)
	if err != nil {
		return fmt.Errorf("approval %s: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	return b.deliver(ctx, id) // at once when it waits here
}

// sweepApprovals deletes the approvals no call waits on any more (their
// api went away before it could).
func (b *Broker) sweepApprovals(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, "DELETE FROM connect_approvals WHERE NOT ("+pendingAge+")")
	return err
}
