package boxes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// errCancelled: the operation was ended by another call (a wake cancels a
// hibernate) while its runner waited or worked.
var errCancelled = errors.New("operation cancelled")

// run is one operation as its runner holds it.
type run struct {
	s          *Service
	op         *Operation
	b          *Box
	sup        sandbox.Supervisor
	recovering bool
}

// start runs op in the background. recovering: the op was adopted from a
// dead api, so its steps check what the machine is before they act.
func (s *Service) start(op *Operation, recovering bool) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runOp(op, recovering)
	}()
}

// runOp takes the box's advisory lock (runners of one box, on every api,
// take turns), checks the operation is still this api's and under way, and
// runs its steps. When the api is closing it leaves the operation as it is,
// for the next api's recovery.
func (s *Service) runOp(op *Operation, recovering bool) {
	ctx := s.ctx
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		s.log.Warn("boxes: operation waits for recovery: no database connection", "operation", op.ID, "err", err)
		return
	}
	defer conn.Release()
	key := lockKey("box", op.BoxID)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		s.log.Warn("boxes: operation waits for recovery: box lock", "operation", op.ID, "err", err)
		return
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", key)
	cur, err := findOp(ctx, s.pool, "id = $1", op.ID)
	if err != nil || cur == nil || !cur.Ended.IsZero() || cur.runner != s.instance {
		return
	}
	b, err := findBox(ctx, s.pool, op.UserID, op.BoxID, false)
	if err != nil {
		s.finish(cur, nil, err)
		return
	}
	sup, err := s.supervisor(b.Host)
	if err != nil {
		s.finish(cur, b, err)
		return
	}
	r := &run{s: s, op: cur, b: b, sup: sup, recovering: recovering}
	s.log.Info("boxes: operation", "operation", op.ID, "kind", op.Kind, "box", op.BoxID, "phase", cur.Phase, "recovering", recovering)
	err = r.steps(ctx)
	if s.ctx.Err() != nil || errors.Is(err, errCancelled) {
		return
	}
	s.finish(r.op, r.b, err)
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
	return pgx.BeginFunc(ctx, r.s.pool, func(tx pgx.Tx) error {
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
	err := tx.QueryRow(ctx, `UPDATE boxes b SET state = $2, image = $3, incarnation = $4, wake_id = $5, machine_id = $6,
 save_id = $7, save_size = $8, saved_at = $9 FROM boxes old WHERE b.id = $1 AND old.id = b.id RETURNING old.state`,
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
// failed operation leaves the box in the state its machine is in.
func (s *Service) finish(op *Operation, b *Box, err error) {
	ctx := context.WithoutCancel(s.ctx)
	op.Phase, op.Error = PhaseDone, ""
	if err != nil {
		op.Phase, op.Error = PhaseFailed, err.Error()
		s.log.Warn("boxes: operation failed", "operation", op.ID, "kind", op.Kind, "box", op.BoxID, "err", err)
	}
	var r *run
	if b != nil {
		r = &run{s: s, op: op, b: b}
		if err != nil {
			if sup, serr := s.supervisor(b.Host); serr == nil {
				r.sup = sup
				b.State = r.machineState(ctx)
			}
		}
	}
	terr := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
		if r != nil {
			return r.writeBox(ctx, tx, b.State)
		}
		return nil
	})
	if terr != nil {
		s.log.Error("boxes: could not end the operation; recovery will", "operation", op.ID, "err", terr)
	}
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
