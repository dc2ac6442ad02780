package boxes

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// recoverLoop looks for what dead apis left, at once and then every
// RecoverEvery, until Close.
func (s *Service) recoverLoop() {
	s.reconcile(s.ctx)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.adopt(s.ctx)
		s.sweep(s.ctx)
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// adopt takes over every operation under way whose runner's instance lock
// is free (that api is dead) and runs it again from its phase, its steps
// checking what the machine is first.
func (s *Service) adopt(ctx context.Context) {
	rows, err := s.pool.Query(ctx, "SELECT DISTINCT runner FROM box_operations WHERE ended_at IS NULL AND runner <> $1", s.instance)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("boxes: recovery: list operations", "err", err)
		}
		return
	}
	var runners []string
	for rows.Next() {
		var r string
		if rows.Scan(&r) == nil {
			runners = append(runners, r)
		}
	}
	rows.Close()
	for _, runner := range runners {
		if s.dead(ctx, runner) {
			s.adoptRunner(ctx, runner)
		}
	}
}

// dead says whether runner's instance lock is free: its api has ended.
// The try and the unlock run on one connection, so no hold is left behind.
func (s *Service) dead(ctx context.Context, runner string) bool {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false
	}
	defer conn.Release()
	key := lockKey("instance", runner)
	var free bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&free); err != nil || !free {
		return false
	}
	_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
	return true
}

func (s *Service) adoptRunner(ctx context.Context, runner string) {
	rows, err := s.pool.Query(ctx, `UPDATE box_operations SET runner = $2 WHERE runner = $1 AND ended_at IS NULL
 RETURNING `+opColumns, runner, s.instance)
	if err != nil {
		s.log.Warn("boxes: recovery: adopt", "runner", runner, "err", err)
		return
	}
	var ops []*Operation
	for rows.Next() {
		if op, err := scanOp(rows); err == nil {
			ops = append(ops, op)
		}
	}
	rows.Close()
	for _, op := range ops {
		s.log.Info("boxes: recovery: adopting an operation of a dead api", "operation", op.ID, "kind", op.Kind, "phase", op.Phase, "dead_runner", runner)
		s.pending.Add(1) // past max_queued: it is under way already
		s.start(op, true)
	}
}

// reconcile, at start, makes the rows and the machines of this api's
// users agree where no operation is under way: a box whose machine
// stopped (its supervisor restarted) or vanished becomes failed (Ensure
// boots it again), and a machine of one of this database's users with no
// box row is deleted, so none is left booted without a row.
func (s *Service) reconcile(ctx context.Context) {
	for _, host := range s.names {
		sup := s.hosts[host]
		ms, err := sup.List(ctx, "")
		if err != nil {
			s.log.Warn("boxes: reconcile: list machines", "host", host, "err", err)
			continue
		}
		for _, m := range ms {
			if !IsBoxID(m.ID) {
				continue
			}
			var ours, hasRow bool
			err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id::text = $1),
 EXISTS (SELECT 1 FROM boxes WHERE id = $2)`, m.Tenant, m.ID).Scan(&ours, &hasRow)
			if err != nil || !ours || hasRow {
				continue
			}
			s.log.Warn("boxes: reconcile: deleting a machine with no box row", "host", host, "machine", m.ID)
			if err := sup.Delete(ctx, m.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				s.log.Warn("boxes: reconcile: delete", "machine", m.ID, "err", err)
			}
		}
		rows, err := s.pool.Query(ctx, "SELECT "+boxColumns+" FROM boxes WHERE host = $1 AND operation_id IS NULL AND state <> 'failed'", host)
		if err != nil {
			continue
		}
		var stale []*Box
		for rows.Next() {
			if b, err := scanBox(rows); err == nil {
				stale = append(stale, b)
			}
		}
		rows.Close()
		for _, b := range stale {
			r := &run{s: s, b: b, sup: sup}
			if st := r.machineState(ctx); st != b.State {
				s.log.Warn("boxes: reconcile: the machine is not what the row says", "box", b.ID, "row", b.State, "machine", st)
				if err := s.correct(ctx, b, st); err != nil {
					s.log.Warn("boxes: reconcile: correct the row", "box", b.ID, "err", err)
				}
			}
		}
	}
}

// correct sets a box's state to what its machine says, only while no
// operation has begun on it since it was read (another api may be at work).
func (s *Service) correct(ctx context.Context, b *Box, st string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE boxes SET state = $3 WHERE id = $1 AND state = $2 AND operation_id IS NULL", b.ID, b.State, st)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return addEvent(ctx, tx, b.UserID, b.ID, st, nil)
	})
}

// leftoverGrace is how long a leftover machine the supervisor does not
// know is kept for another try: an operation that was under way when its
// user was deleted may still create it.
const leftoverGrace = 10 * time.Minute

// sweep removes from their hosts the machines and saves a deleted user's
// rows named (box_leftovers, kept by a trigger on users): a leftover goes
// once its host has deleted it, or said it has none for leftoverGrace.
// A host this api lacks is another api's to sweep.
func (s *Service) sweep(ctx context.Context) {
	rows, err := s.pool.Query(ctx, "SELECT kind, id, host, left_at < now() - make_interval(secs => $2) FROM box_leftovers WHERE host = ANY($1)",
		s.names, leftoverGrace.Seconds())
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("boxes: sweep: list leftovers", "err", err)
		}
		return
	}
	type leftover struct {
		kind, id, host string
		old            bool
	}
	var ls []leftover
	for rows.Next() {
		var l leftover
		if rows.Scan(&l.kind, &l.id, &l.host, &l.old) == nil {
			ls = append(ls, l)
		}
	}
	rows.Close()
	for _, l := range ls {
		sup := s.hosts[l.host]
		var err error
		if l.kind == "machine" {
			err = sup.Delete(ctx, l.id)
		} else {
			err = sup.DeleteSave(ctx, l.id)
		}
		switch {
		case err == nil:
			s.log.Info("boxes: sweep: removed what a deleted user left", "kind", l.kind, "id", l.id, "host", l.host)
		case errors.Is(err, sandbox.ErrNotFound) && (l.kind == "save" || l.old):
		default:
			if !errors.Is(err, sandbox.ErrNotFound) {
				s.log.Warn("boxes: sweep: remove what a deleted user left", "kind", l.kind, "id", l.id, "host", l.host, "err", err)
			}
			continue
		}
		if _, err := s.pool.Exec(ctx, "DELETE FROM box_leftovers WHERE kind = $1 AND id = $2", l.kind, l.id); err != nil && ctx.Err() == nil {
			s.log.Warn("boxes: sweep: forget a leftover", "kind", l.kind, "id", l.id, "err", err)
		}
	}
}
