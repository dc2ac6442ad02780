package boxes

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/proto"

	"github.com/cocoonbox/cocoonbox/api/database"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the boxes package's migrations (boxes_schema_migrations); its
// tables refer to users, so it migrates after users.Schema.
var Schema = database.NewSchema("boxes_schema_migrations", migrations, "migrations")

// Channel is the NOTIFY channel of the event log: every transaction that
// adds box events notifies it with the user's id, so every api's Watch of
// that user reads what came after its cursor.
const Channel = "cocoonbox_boxes"

// The box states (Contract: Control MCP: absent starting running
// hibernating hibernated failed). Absent is never stored: a box without a
// row is absent.
const (
	Absent      = "absent"
	Starting    = "starting"
	Running     = "running"
	Hibernating = "hibernating"
	Hibernated  = "hibernated"
	Failed      = "failed"
)

// The operation phases (Contract: Control MCP).
const (
	PhaseCreating       = "creating"
	PhaseWaking         = "waking"
	PhaseSnapshotting   = "snapshotting"
	PhaseSaving         = "saving"
	PhaseRestoring      = "restoring"
	PhaseDeleting       = "deleting"
	PhaseDone           = "done"
	PhaseFailed         = "failed"
	PhaseRestoringFiles = "restoring_files"
)

// Box is one row of boxes.
type Box struct {
	ID, UserID, Name, Image string
	// State is one of the states above, never Absent.
	State string
	// Host names the supervisor holding the machine.
	Host        string
	Incarnation int64
	seed        []byte
	// WakeID and MachineID are what the api wrote at the last boot or wake.
	WakeID, MachineID string
	// SaveID, SaveSize (bytes) and SavedAt are the newest save's ("" for none).
	SaveID   string
	SaveSize int64
	SavedAt  time.Time
	// OperationID is the operation under way ("" for none).
	OperationID string
	Created     time.Time
	// Agent: an OAuth grant created the box (boxes.agent, set by its
	// insert and kept for good; Contract: OAuth for agents).
	Agent bool
}

// Operation is one row of box_operations.
type Operation struct {
	ID, BoxID, UserID, Kind, Phase, Error, RequestID string
	runner, image, restoreSave                       string
	// fresh: inserted by this call (begin starts its runner), not found.
	fresh bool
	// TotalBytes is the save's size in bytes, in and after phase saving.
	TotalBytes int64
	Started    time.Time
	// Ended is zero while the operation is under way.
	Ended time.Time
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const boxColumns = `id, user_id::text, name, image, state, host, incarnation, identity_seed, wake_id, machine_id,
 coalesce(save_id, ''), coalesce(save_size, 0), coalesce(saved_at, 'epoch'), coalesce(operation_id, ''), created_at, agent`

func scanBox(row pgx.Row) (*Box, error) {
	b := &Box{}
	err := row.Scan(&b.ID, &b.UserID, &b.Name, &b.Image, &b.State, &b.Host, &b.Incarnation, &b.seed, &b.WakeID,
		&b.MachineID, &b.SaveID, &b.SaveSize, &b.SavedAt, &b.OperationID, &b.Created, &b.Agent)
	if b.SaveID == "" {
		b.SavedAt = time.Time{}
	}
	return b, err
}

// findBox answers the user's box named by ref: a box id, a name, or ""
// for the oldest. lock takes the row lock (FOR UPDATE) for the
// transaction. Another user's box is ErrNotFound.
func findBox(ctx context.Context, q querier, userID, ref string, lock bool) (*Box, error) {
	where := "user_id = $1 AND name = $2"
	switch {
	case ref == "":
		where = "user_id = $1 AND $2 = ''"
	case IsBoxID(ref):
		where = "user_id = $1 AND id = $2"
	case CheckName(ref) != nil:
		return nil, invalid("box", "%q is neither a box id (cb- and 16 hex digits) nor a box name (1 to 63 of [a-z0-9-], a letter first, not '-' last)", ref)
	}
	sql := "SELECT " + boxColumns + " FROM boxes WHERE " + where + " ORDER BY created_at, id LIMIT 1"
	if lock {
		sql += " FOR UPDATE"
	}
	b, err := scanBox(q.QueryRow(ctx, sql, userID, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		if ref == "" {
			return nil, fmt.Errorf("the user has no box: %w", ErrNotFound)
		}
		return nil, fmt.Errorf("box %q: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read box %q: %w", ref, err)
	}
	return b, nil
}

// listBoxes answers the user's boxes, oldest first.
func listBoxes(ctx context.Context, q querier, userID string) ([]*Box, error) {
	rows, err := q.Query(ctx, "SELECT "+boxColumns+" FROM boxes WHERE user_id = $1 ORDER BY created_at, id", userID)
	if err != nil {
		return nil, fmt.Errorf("list boxes: %w", err)
	}
	defer rows.Close()
	var out []*Box
	for rows.Next() {
		b, err := scanBox(rows)
		if err != nil {
			return nil, fmt.Errorf("list boxes: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

const opColumns = `id, box_id, user_id::text, kind, phase, error, request_id, runner, image, restore_save, total_bytes,
 started_at, coalesce(ended_at, 'epoch')`

func scanOp(row pgx.Row) (*Operation, error) {
	o := &Operation{}
	err := row.Scan(&o.ID, &o.BoxID, &o.UserID, &o.Kind, &o.Phase, &o.Error, &o.RequestID, &o.runner, &o.image,
		&o.restoreSave, &o.TotalBytes, &o.Started, &o.Ended)
	if o.Ended.Equal(time.Unix(0, 0)) {
		o.Ended = time.Time{}
	}
	return o, err
}

// findOp answers one operation by a column's value (id, or request_id
// with the user's id); nil, nil when there is none.
func findOp(ctx context.Context, q querier, where string, args ...any) (*Operation, error) {
	o, err := scanOp(q.QueryRow(ctx, "SELECT "+opColumns+" FROM box_operations WHERE "+where, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read operation: %w", err)
	}
	return o, nil
}

func insertOp(ctx context.Context, tx pgx.Tx, o *Operation) error {
	err := tx.QueryRow(ctx, `INSERT INTO box_operations (id, box_id, user_id, kind, phase, request_id, runner, image, restore_save)
 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING started_at`,
		o.ID, o.BoxID, o.UserID, o.Kind, o.Phase, o.RequestID, o.runner, o.image, o.restoreSave).Scan(&o.Started)
	if err != nil {
		return fmt.Errorf("insert operation: %w", err)
	}
	o.fresh = true
	return nil
}

// eventLockKey is the transaction advisory lock every event insert takes,
// so seq is given in commit order.
const eventLockKey = 0x636f636f6f6e6576 // "cocoonev"

// addEvent appends one event (a state, or the operation as it is now) to
// the log and notifies Channel at commit.
func addEvent(ctx context.Context, tx pgx.Tx, userID, boxID, state string, op *Operation) error {
	var opID any
	var opBytes []byte
	var st any
	if op != nil {
		b, err := proto.Marshal(op.proto())
		if err != nil {
			return err
		}
		opID, opBytes = op.ID, b
	} else {
		st = state
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(eventLockKey)); err != nil {
		return fmt.Errorf("event lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO box_events (seq, box_id, user_id, state, operation_id, operation)
 VALUES ((SELECT coalesce(max(seq), 0) + 1 FROM box_events), $1, $2, $3, $4, $5)`, boxID, userID, st, opID, opBytes); err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, userID); err != nil {
		return fmt.Errorf("notify %s: %w", Channel, err)
	}
	return nil
}

// readEvents answers the user's events with seq > after (of one box when
// boxID is set), at most limit of them, in order.
func readEvents(ctx context.Context, q querier, userID, boxID string, after uint64, limit int) ([]*controlv1.BoxEvent, error) {
	rows, err := q.Query(ctx, `SELECT seq, box_id, at, coalesce(state, ''), operation FROM box_events
 WHERE user_id = $1 AND seq > $2 AND ($3 = '' OR box_id = $3) ORDER BY seq LIMIT $4`, userID, int64(after), boxID, limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	var out []*controlv1.BoxEvent
	for rows.Next() {
		var seq int64
		var at time.Time
		var state string
		var opBytes []byte
		e := &controlv1.BoxEvent{}
		if err := rows.Scan(&seq, &e.BoxId, &at, &state, &opBytes); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		e.Seq, e.At = uint64(seq), timestamp(at)
		if opBytes != nil {
			op := &controlv1.Operation{}
			if err := proto.Unmarshal(opBytes, op); err != nil {
				return nil, fmt.Errorf("event %d: %w", seq, err)
			}
			e.Event = &controlv1.BoxEvent_Operation{Operation: op}
		} else {
			e.Event = &controlv1.BoxEvent_State{State: stateProto(state)}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
