package boxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/steps"
)

// errCancelled: the operation was ended by another call (a wake cancels a
// hibernate) while its runner waited or worked.
var errCancelled = errors.New("operation cancelled")

// run is one operation as its runner holds it. db is the operation's one
// database connection (from the operations' pool, held with the box's
// lock): every query of the run goes through it, so a runner never waits
// for a second connection while it holds one.
type run struct {
	s          *Service
	db         *pgxpool.Conn
	op         *Operation
	b          *Box
	sup        sandbox.Supervisor
	recovering bool
}

// reserve takes a place for one more operation of this api (queued or in
// flight), or refuses with ErrLimit past max_operations + max_queued; the
// place is the started operation's (start) or given back (release).
func (s *Service) reserve() error {
	if n := s.pending.Add(1); n > s.maxPending {
		s.pending.Add(-1)
		return fmt.Errorf("this api has %d operations under way or queued (boxes.max_operations %d, boxes.max_queued %d); try again shortly: %w",
			n-1, cap(s.slots), s.maxPending-int64(cap(s.slots)), ErrLimit)
	}
	return nil
}

func (s *Service) release() { s.pending.Add(-1) }

// start runs op in the background once a turn is free (at most
// max_operations at once), holding the place reserve took. recovering:
// the op was adopted from a dead api, so its steps check what the machine
// is before they act.
func (s *Service) start(op *Operation, recovering bool) {
	s.wg.Add(1)
	tl := steps.New()
	go func() {
		defer s.wg.Done()
		defer s.release()
		queued := steps.Begin(steps.With(s.ctx, tl), "queue")
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			return // left under way, for the next api's recovery
		}
		queued()
		defer func() { <-s.slots }()
		s.runOp(op, recovering, tl)
	}()
}

// runOp takes a connection of the operations' pool and the box's advisory
// lock on it (runners of one box, on every api, take turns), checks the
// operation is still this api's and under way, and runs its steps on that
// connection. When the api is closing it leaves the operation as it is,
// for the next api's recovery, whatever step it was at. tl records its
// steps (logged at debug level when it ends).
func (s *Service) runOp(op *Operation, recovering bool, tl *steps.Timeline) {
	ctx := steps.With(s.ctx, tl)
	locked := steps.Begin(ctx, "lock")
	conn, err := s.ops.Acquire(ctx)
	if err != nil {
		s.log.Warn("boxes: operation waits for recovery: no database connection", "operation", op.ID, "err", err)
		return
	}
	key := lockKey("box", op.BoxID)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		s.log.Warn("boxes: operation waits for recovery: box lock", "operation", op.ID, "err", err)
		closeConn(conn)
		return
	}
	defer func() {
		if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", key); err != nil {
			closeConn(conn) // its session ends, and the lock with it
			return
		}
		conn.Release()
	}()
	r := &run{s: s, db: conn, recovering: recovering}
	cur, err := findOp(ctx, conn, "id = $1", op.ID)
	if err != nil || cur == nil || !cur.Ended.IsZero() || cur.runner != s.instance {
		return
	}
	r.op = cur
	b, err := findBox(ctx, conn, op.UserID, op.BoxID, false)
	if err == nil {
		r.b = b
		r.sup, err = s.supervisor(b.Host)
	}
	locked()
	if err == nil {
		s.log.Info("boxes: operation", "operation", op.ID, "kind", op.Kind, "box", op.BoxID, "phase", cur.Phase, "recovering", recovering)
		err = r.steps(ctx)
	}
	if s.ctx.Err() != nil || errors.Is(err, errCancelled) {
		return
	}
	finished := steps.Begin(ctx, "finish")
	r.finish(err)
	finished()
	s.logSteps(r.op, tl)
}

// logSteps logs how long each step of op took (steps.Timeline), in the
// order they ended, at debug level, and hands them to onSteps (set by the
// benchmarks).
func (s *Service) logSteps(op *Operation, tl *steps.Timeline) {
	if s.onSteps != nil {
		s.onSteps(op, tl)
	}
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	var b strings.Builder
	for _, sp := range tl.Spans() {
		fmt.Fprintf(&b, "%s=%.1fms ", sp.Step, float64(sp.Took().Microseconds())/1000)
	}
	s.log.Debug("boxes: operation steps", "operation", op.ID, "kind", op.Kind, "phase", op.Phase,
		"total_ms", tl.Since().Milliseconds(), "steps", strings.TrimSpace(b.String()))
}

// closeConn ends a pool connection whose session may still hold a lock,
// instead of giving it back.
func closeConn(c *pgxpool.Conn) {
	pc := c.Hijack()
	pc.Close(context.Background())
}

func (r *run) steps(ctx context.Context) error {
	switch r.op.Kind {
	case "create", "ensure":
		return r.converge(ctx)
	case "hibernate":
		return r.hibernate(ctx)
	case "save":
		return r.save(ctx)
	case "upgrade":
		return r.upgrade(ctx)
	case "delete":
		return r.delete(ctx)
	}
	return fmt.Errorf("operation kind %q has no runner", r.op.Kind)
}

// tx runs fn in a transaction that first checks the operation is still
// under way (errCancelled when another call ended it).
func (r *run) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		var ended bool
		if err := tx.QueryRow(ctx, "SELECT ended_at IS NOT NULL FROM box_operations WHERE id = $1 FOR UPDATE", r.op.ID).Scan(&ended); err != nil {
			return err
		}
		if ended {
			return errCancelled
		}
		return fn(tx)
	})
}

// phase moves the operation to phase p, with its event.
func (r *run) phase(ctx context.Context, p string) error {
	if r.op.Phase == p {
		return nil
	}
	defer steps.Begin(ctx, "phase")()
	return r.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE box_operations SET phase = $2, total_bytes = $3 WHERE id = $1", r.op.ID, p, r.op.TotalBytes); err != nil {
			return err
		}
		r.op.Phase = p
		return addEvent(ctx, tx, r.op.UserID, r.op.BoxID, "", r.op)
	})
}

// state writes the box's state and what the api knows of its machine
// (image, incarnation, wake id, machine id, save), with a state event when
// the state changed.
func (r *run) state(ctx context.Context, st string) error {
	defer steps.Begin(ctx, "state")()
	return r.tx(ctx, func(tx pgx.Tx) error {
		return r.writeBox(ctx, tx, st)
	})
}

func (r *run) writeBox(ctx context.Context, tx pgx.Tx, st string) error {
	b := r.b
	var prev string
	var saveID, savedAt any
	if b.SaveID != "" {
		saveID, savedAt = b.SaveID, b.SavedAt
	}
	// A box going running starts idle hibernate's clock again (idle.go).
	err := tx.QueryRow(ctx, `UPDATE boxes b SET state = $2, image = $3, incarnation = $4, wake_id = $5, machine_id = $6,
 save_id = $7, save_size = $8, saved_at = $9,
 active_at = CASE WHEN $2 = 'running' AND old.state <> 'running' THEN now() ELSE old.active_at END
 FROM boxes old WHERE b.id = $1 AND old.id = b.id RETURNING old.state`,
		b.ID, st, b.Image, b.Incarnation, b.WakeID, b.MachineID, saveID, b.SaveSize, savedAt).Scan(&prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // deleted
	}
	if err != nil {
		return fmt.Errorf("write box %s: %w", b.ID, err)
	}
	b.State = st
	if prev != st {
		return addEvent(ctx, tx, b.UserID, b.ID, st, nil)
	}
	return nil
}

// finish ends the operation done (err nil) or failed with err's text. A
// failed operation leaves the box (when it still has one) in the state its
// machine is in.
func (r *run) finish(err error) {
	s, op, b := r.s, r.op, r.b
	ctx := context.WithoutCancel(s.ctx)
	op.Phase, op.Error = PhaseDone, ""
	if err != nil {
		op.Phase, op.Error = PhaseFailed, err.Error()
		s.log.Warn("boxes: operation failed", "operation", op.ID, "kind", op.Kind, "box", op.BoxID, "err", err)
		if b != nil && r.sup != nil {
			b.State = r.machineState(ctx)
		}
	}
	terr := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE box_operations SET phase = $2, error = $3, total_bytes = $4, ended_at = now()
 WHERE id = $1 AND ended_at IS NULL`, op.ID, op.Phase, op.Error, op.TotalBytes)
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			op.Ended = time.Now()
			if _, err := tx.Exec(ctx, "UPDATE boxes SET operation_id = NULL WHERE id = $1 AND operation_id = $2", op.BoxID, op.ID); err != nil {
				return err
			}
			if err := addEvent(ctx, tx, op.UserID, op.BoxID, "", op); err != nil {
				return err
			}
			if b != nil {
				return r.writeBox(ctx, tx, b.State)
			}
			return nil
		})
	})
	if terr != nil {
		s.log.Error("boxes: could not end the operation; recovery will", "operation", op.ID, "err", terr)
	}
}

// retry runs fn again, up to five times in all, while it fails with
// PostgreSQL's deadlock or serialization failure (40P01, 40001): both
// roll the transaction back, and only this api would ever end the
// operation (recovery adopts a dead api's, not a live one's).
func retry(ctx context.Context, fn func() error) error {
	var err error
	for i := range 5 {
		var pe *pgconn.PgError
		if err = fn(); !errors.As(err, &pe) || (pe.Code != "40P01" && pe.Code != "40001") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i+1) * 50 * time.Millisecond):
		}
	}
	return err
}

// machineState is the box state its machine's state means (Failed for a
// stopped or missing machine: Ensure boots it).
func (r *run) machineState(ctx context.Context) string {
	m, err := r.sup.Get(ctx, r.b.ID)
	if err != nil {
		return Failed
	}
	switch m.State {
	case sandbox.Running:
		return Running
	case sandbox.Hibernated:
		return Hibernated
	case sandbox.Starting:
		return Starting
	}
	return Failed
}
