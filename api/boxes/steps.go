package boxes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/steps"
)

// converge makes the box's machine running, from whatever it is: made
// (or restored) when the box never booted, booted when stopped or
// failed, woken when hibernated. A create that fails removes what it made,
// row and machine, so no row is left without a box.
func (r *run) converge(ctx context.Context) error {
	err := r.toRunning(ctx)
	if err != nil && r.op.Kind == "create" && !errors.Is(err, errCancelled) && r.s.ctx.Err() == nil {
		if derr := r.remove(ctx); derr != nil {
			return fmt.Errorf("%w (and removing the half-made box: %v)", err, derr)
		}
		r.b = nil
	}
	return err
}

func (r *run) toRunning(ctx context.Context) error {
	got := steps.Begin(ctx, "get")
	m, err := r.sup.Get(ctx, r.b.ID)
	got()
	if errors.Is(err, sandbox.ErrNotFound) && r.b.Incarnation == 0 {
		if err := r.syncCap(ctx); err != nil {
			return err
		}
		made := steps.Begin(ctx, "make")
		spec := sandbox.Spec{ID: r.b.ID, Tenant: r.b.UserID, Image: r.b.Image}
		if snap, ok := strings.CutPrefix(r.op.restoreSave, stateRestore); ok {
			m, err = r.restoreState(ctx, spec, snap)
		} else if r.op.restoreSave != "" {
			m, err = r.sup.Restore(ctx, r.op.restoreSave, spec)
		} else {
			m, err = r.sup.Create(ctx, spec)
		}
		made()
	}
	if err != nil {
		return fmt.Errorf("machine %s: %w", r.b.ID, supervisorError(err))
	}
	switch m.State {
	case sandbox.Running:
		if r.recovering || r.b.WakeID == "" {
			return r.provision(ctx, false)
		}
		return r.state(ctx, Running)
	case sandbox.Hibernated:
		if err := r.phase(ctx, PhaseWaking); err != nil {
			return err
		}
		thawed := steps.Begin(ctx, "thaw")
		if _, err := r.sup.Wake(ctx, r.b.ID); err != nil {
			return fmt.Errorf("wake: %w", supervisorError(err))
		}
		thawed()
		return r.provision(ctx, true)
	default:
		return r.boot(ctx)
	}
}

// boot boots the stopped machine (a new incarnation) with its identity
// written as Boot's first command, and provisions it.
func (r *run) boot(ctx context.Context) error {
	if err := r.phase(ctx, PhaseCreating); err != nil {
		return err
	}
	rec := r.b.Record()
	claims := steps.Begin(ctx, "claims")
	if err := r.s.setClaims(ctx, r.sup, r.b, rec.WakeID); err != nil {
		return fmt.Errorf("claim env: %w", err)
	}
	claims()
	booted := steps.Begin(ctx, "boot")
	first, err := bootCommands(rec)
	if err != nil {
		return err
	}
	m, err := r.sup.Boot(ctx, r.b.ID, first...)
	if err != nil {
		return fmt.Errorf("boot: %w", supervisorError(err))
	}
	booted()
	r.b.Incarnation++
	return r.provisionWith(ctx, false, rec, m)
}

// remove deletes the box's machine and row, with the absent state event.
func (r *run) remove(ctx context.Context) error {
	if err := r.sup.Delete(ctx, r.b.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("delete machine: %w", supervisorError(err))
	}
	r.s.wakes.forget(r.b.ID)
	err := pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM boxes WHERE id = $1", r.b.ID); err != nil {
			return err
		}
		return addEvent(ctx, tx, r.b.UserID, r.b.ID, Absent, nil)
	})
	if err == nil && r.b.Agent { // an agent box removed: the cap follows
		if err := r.syncCap(ctx); err != nil {
			r.s.log.Warn("boxes: tenant cap not lowered", "user", r.b.UserID, "err", err)
		}
	}
	return err
}

func (r *run) hibernate(ctx context.Context) error {
	m, err := r.sup.Get(ctx, r.b.ID)
	if err != nil {
		return fmt.Errorf("machine: %w", supervisorError(err))
	}
	if m.State != sandbox.Hibernated {
		if _, err := r.sup.Hibernate(ctx, r.b.ID); err != nil {
			return fmt.Errorf("hibernate: %w", supervisorError(err))
		}
	}
	return r.state(ctx, Hibernated)
}

// save saves the machine into the state store (statesaves.go), then on
// its supervisor (which flushes its file systems first), and keeps only
// this newest disk-level save. The save is named after the operation, so
// one run again after a crash replaces the save its first run may have
// made instead of leaving it unrecorded on the supervisor. A store that
// fails fails the save before the disk-level one, the box left as it was.
func (r *run) save(ctx context.Context) error {
	if err := r.saveState(ctx); err != nil {
		return fmt.Errorf("save into the state store: %w", err)
	}
	info, err := r.sup.Save(ctx, r.b.ID, saveName(r.op.ID))
	if err != nil {
		return fmt.Errorf("save: %w", supervisorError(err))
	}
	old := r.b.SaveID
	r.b.SaveID, r.b.SaveSize, r.b.SavedAt = info.ID, info.Size, info.Created
	r.op.TotalBytes = info.Size
	if err := r.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE box_operations SET total_bytes = $2 WHERE id = $1", r.op.ID, info.Size); err != nil {
			return err
		}
		if err := addEvent(ctx, tx, r.op.UserID, r.op.BoxID, "", r.op); err != nil {
			return err
		}
		return r.writeBox(ctx, tx, r.b.State)
	}); err != nil {
		return err
	}
	if old != "" && old != info.ID {
		if err := r.sup.DeleteSave(ctx, old); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			r.s.log.Warn("boxes: the older save stays behind", "box", r.b.ID, "save", old, "err", err)
		}
	}
	return nil
}

// upgrade saves, rebases onto the operation's image and provisions the
// new incarnation. Recovering past the save, a machine already on the
// image is only provisioned.
func (r *run) upgrade(ctx context.Context) error {
	if r.op.Phase == PhaseSaving {
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	m, err := r.sup.Get(ctx, r.b.ID)
	if err != nil {
		return fmt.Errorf("machine: %w", supervisorError(err))
	}
	if m.Image != r.op.image || m.State != sandbox.Running {
		if err := r.phase(ctx, PhaseRestoring); err != nil {
			return err
		}
		if err := r.state(ctx, Starting); err != nil {
			return err
		}
		if m.Image != r.op.image {
			if m, err = r.sup.Rebase(ctx, r.b.ID, r.op.image); err != nil {
				return fmt.Errorf("rebase onto %s: %w", r.op.image, supervisorError(err))
			}
		}
		if m.State != sandbox.Running {
			if _, err := r.sup.Boot(ctx, r.b.ID); err != nil {
				return fmt.Errorf("boot: %w", supervisorError(err))
			}
		}
		r.b.Incarnation++
	}
	r.b.Image = m.Image
	// provision sets the claim env again, for the new image (one older
	// than v23 had no keys, one that intercepts gets them) and the new
	// incarnation's door key.
	if err := r.phase(ctx, PhaseRestoringFiles); err != nil {
		return err
	}
	return r.provision(ctx, false)
}

// delete removes the machine and the row, keeping the box's newest save
// under its name for a Create with Restore (replacing an older kept one).
func (r *run) delete(ctx context.Context) error {
	if err := r.sup.Delete(ctx, r.b.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("delete machine: %w", supervisorError(err))
	}
	r.s.wakes.forget(r.b.ID)
	var older string
	err := r.tx(ctx, func(tx pgx.Tx) error {
		if r.b.SaveID != "" {
			err := tx.QueryRow(ctx, "SELECT save_id FROM box_saves WHERE user_id = $1 AND name = $2", r.b.UserID, r.b.Name).Scan(&older)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO box_saves (user_id, name, save_id, host, image, size, saved_at)
 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_id, name) DO UPDATE
 SET save_id = $3, host = $4, image = $5, size = $6, saved_at = $7`,
				r.b.UserID, r.b.Name, r.b.SaveID, r.b.Host, r.b.Image, r.b.SaveSize, r.b.SavedAt); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM boxes WHERE id = $1", r.b.ID); err != nil {
			return err
		}
		return addEvent(ctx, tx, r.b.UserID, r.b.ID, Absent, nil)
	})
	if err != nil {
		return err
	}
	if older != "" && older != r.b.SaveID {
		if err := r.sup.DeleteSave(ctx, older); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			r.s.log.Warn("boxes: an older kept save stays behind", "save", older, "err", err)
		}
	}
	if err := r.syncCap(ctx); err != nil {
		r.s.log.Warn("boxes: tenant cap not lowered", "user", r.b.UserID, "err", err)
	}
	r.b = nil
	return nil
}

// syncCap sets the user's tenant cap on the box's supervisor: max_boxes +
// min(agent boxes, max_agent_boxes) + 1 (the Rebase overlap; Contract:
// Agent boxes and the user's limits; Agent boxes of a user). It runs
// before each create's machine and after each delete, so the cap follows
// the agent boxes as they are added and removed.
func (r *run) syncCap(ctx context.Context) error {
	defer steps.Begin(ctx, "cap")()
	var claims int
	if err := r.db.QueryRow(ctx, `SELECT u.max_boxes + least(count(b.id), coalesce(u.max_agent_boxes, count(b.id))) + 1
 FROM users u LEFT JOIN boxes b ON b.user_id = u.id AND b.agent WHERE u.id = $1 GROUP BY u.id`, r.b.UserID).Scan(&claims); err != nil {
		return fmt.Errorf("read max_boxes and the agent boxes: %w", err)
	}
	if err := r.sup.SetTenantCap(ctx, r.b.UserID, claims); err != nil {
		return fmt.Errorf("tenant cap: %w", supervisorError(err))
	}
	return nil
}

// saveName is the save an operation makes: "save-" and the 16 hex digits of
// its id ("op-…"), a name the supervisor takes as it is.
func saveName(opID string) string { return "save-" + strings.TrimPrefix(opID, "op-") }
