package boxes

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Call is what every mutating call carries.
type Call struct {
	UserID string
	// RequestID is the caller's (1 to 64 of [A-Za-z0-9_.:-]): a call
	// repeated with it answers the first call's operation and does nothing.
	RequestID string
	// Box is a box id or name ("" for the user's oldest box).
	Box string
	// Incarnation, when not 0, must be the box's (else ErrState: stale).
	Incarnation int64
}

// limits are a user's, read under the user's row lock: maxAgentBoxes is
// users.max_agent_boxes, 0 for none (NULL).
type limits struct{ maxBoxes, maxRunning, maxAgentBoxes int }

// plan checks a call against the box (nil for a create) inside begin's
// transaction and writes what the operation starts with: the box row, the
// operation, their events. It answers the box and the operation (nil when
// there is nothing to do).
type plan func(ctx context.Context, tx pgx.Tx, l limits, b *Box) (*Box, *Operation, error)

// begin runs one mutating call: under the user's row lock (every api
// takes it, so a user's calls are checked one at a time), a request id
// seen before answers its first operation, else the grant's Check (a call
// under WithAgent) and plan decide; after the
// commit, a runner starts the operation the call inserted (one it joined
// has its runner). A call when this api's queue is full is ErrLimit
// before anything is read.
func (s *Service) begin(ctx context.Context, c Call, kind string, needBox bool, p plan) (*Box, *Operation, error) {
	if err := checkRequestID(c.RequestID); err != nil {
		return nil, nil, err
	}
	if err := s.reserve(); err != nil {
		return nil, nil, err
	}
	started := false
	defer func() {
		if !started {
			s.release()
		}
	}()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", kind, err)
	}
	defer tx.Rollback(ctx)
	l, err := lockUser(ctx, tx, c.UserID)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", kind, err)
	}
	if first, err := findOp(ctx, tx, "user_id = $1 AND request_id = $2", c.UserID, c.RequestID); err != nil || first != nil {
		if err != nil {
			return nil, nil, err
		}
		if first.Kind != kind {
			return nil, nil, invalid("request_id", "%q began a %s (%s); a %s needs a request id of its own", c.RequestID, first.Kind, first.ID, kind)
		}
		b, err := findBox(ctx, tx, c.UserID, first.BoxID, false)
		if errors.Is(err, ErrNotFound) {
			b, err = nil, nil // a deleted box: the operation alone
		}
		return b, first, err
	}
	var b *Box
	if needBox {
		if b, err = findBox(ctx, tx, c.UserID, c.Box, true); err != nil {
			return nil, nil, err
		}
		if c.Incarnation != 0 && c.Incarnation != b.Incarnation {
			return nil, nil, fmt.Errorf("incarnation: %d is stale, box %s is at incarnation %d: %w", c.Incarnation, b.Name, b.Incarnation, ErrState)
		}
		// Refused before anything is written: a runner here could not reach
		// the box, and its failure would leave the row in the state the
		// plan set (an api whose sandbox.hosts lacks a host, as in a rollout).
		if _, err := s.supervisor(b.Host); err != nil {
			return nil, nil, err
		}
	}
	boxID := ""
	if b != nil {
		boxID = b.ID
		s.touch(ctx, boxID)
	}
	if err := checkAgent(ctx, tx, kind, boxID); err != nil {
		return nil, nil, err
	}
	b, op, err := p(ctx, tx, l, b)
	if err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return nil, nil, fmt.Errorf("box %s: %w", c.Box, ErrBusy)
		}
		return nil, nil, fmt.Errorf("%s: commit: %w", kind, err)
	}
	if op != nil && op.fresh {
		started = true
		s.start(op, false)
	}
	return b, op, nil
}

// lockUser takes the user's row lock for tx, so a user's calls are
// checked one at a time, and answers their limits. FOR NO KEY UPDATE,
// not FOR UPDATE: every row that names the user (an event, an operation,
// a box) takes a key-share lock on it for its foreign key, which FOR
// UPDATE blocks; a runner's transaction holding the event lock then waited
// for a call holding the user, which waited for the event lock: deadlock
// (one user's 50 creates and deletes met it).
func lockUser(ctx context.Context, tx pgx.Tx, userID string) (limits, error) {
	var l limits
	err := tx.QueryRow(ctx, "SELECT max_boxes, max_running, coalesce(max_agent_boxes, 0) FROM users WHERE id = $1 FOR NO KEY UPDATE",
		userID).Scan(&l.maxBoxes, &l.maxRunning, &l.maxAgentBoxes)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("user %s: %w", userID, ErrNotFound)
	}
	if err != nil {
		return l, fmt.Errorf("lock the user: %w", err)
	}
	return l, nil
}

// newOp inserts an operation of kind on b in phase and puts b in state
// (unchanged when ""), with their events.
func (s *Service) newOp(ctx context.Context, tx pgx.Tx, c Call, kind string, b *Box, phase, state string) (*Operation, error) {
	op := &Operation{ID: newID("op-"), BoxID: b.ID, UserID: c.UserID, Kind: kind, Phase: phase,
		RequestID: c.RequestID, runner: s.instance, image: b.Image}
	if err := insertOp(ctx, tx, op); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "box_operations_one_under_way" {
			return nil, fmt.Errorf("box %s has an operation under way: %w", b.Name, ErrBusy)
		}
		return nil, err
	}
	b.OperationID = op.ID
	if state == "" {
		state = b.State
	}
	changed := state != b.State
	b.State = state
	if _, err := tx.Exec(ctx, "UPDATE boxes SET operation_id = $2, state = $3 WHERE id = $1", b.ID, op.ID, state); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	if err := addEvent(ctx, tx, c.UserID, b.ID, "", op); err != nil {
		return nil, err
	}
	if changed {
		if err := addEvent(ctx, tx, c.UserID, b.ID, state, nil); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// busy refuses a box with an operation under way.
func busy(b *Box) error {
	if b.OperationID != "" {
		return fmt.Errorf("box %s is mid-operation (%s); wait for it (Events, Status) and call again: %w", b.Name, b.OperationID, ErrBusy)
	}
	return nil
}

// needState refuses a box that is not in state.
func needState(b *Box, kind string, states ...string) error {
	if slices.Contains(states, b.State) {
		return nil
	}
	return fmt.Errorf("box %s is %s; %s needs it %s: %w", b.Name, b.State, kind, strings.Join(states, " or "), ErrState)
}

// running counts the user's own boxes holding the running limit
// (starting, running or hibernating), but the box except. An agent box
// holds none of it (Contract: Agent boxes and the user's limits).
func running(ctx context.Context, tx pgx.Tx, userID, except string) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM boxes WHERE user_id = $1 AND id <> $2 AND NOT agent
 AND state IN ('starting', 'running', 'hibernating')`, userID, except).Scan(&n)
	return n, err
}

func checkRunning(ctx context.Context, tx pgx.Tx, userID, except string, l limits) error {
	n, err := running(ctx, tx, userID, except)
	if err != nil {
		return fmt.Errorf("count running boxes: %w", err)
	}
	if n >= l.maxRunning {
		return fmt.Errorf("running limit: the user has %d boxes starting, running or hibernating and max_running is %d; hibernate one first: %w", n, l.maxRunning, ErrLimit)
	}
	return nil
}

func newSeed() []byte {
	seed := make([]byte, 32)
	rand.Read(seed)
	return seed
}
