package boxes

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// DefaultName is the name Ensure gives the box it creates for a user who
// has none.
const DefaultName = "main"

// CreateRequest is a Create's input beyond the Call (whose Box is unused).
type CreateRequest struct {
	// Name is the box's name and hostname (CheckName).
	Name string
	// Image is an image ref of Images ("" for the latest).
	Image string
	// Restore starts the box from the kept save of the user's deleted box
	// of the same name (Delete keeps a box's newest save), on that save's
	// host; its image is the save's unless Image names one.
	Restore bool
}

// Create makes the user's box and boots it (phase creating), answering at
// once with the box (state starting) and its operation. Errors: ErrInvalid
// (name, image, restore, request_id), ErrExists (the name is taken),
// ErrLimit (max_boxes, the running limit), ErrUnavailable.
func (s *Service) Create(ctx context.Context, c Call, r CreateRequest) (*Box, *Operation, error) {
	if err := CheckName(r.Name); err != nil {
		return nil, nil, err
	}
	return s.begin(ctx, c, "create", false, func(ctx context.Context, tx pgx.Tx, l limits, _ *Box) (*Box, *Operation, error) {
		return s.planCreate(ctx, tx, c, "create", r, l)
	})
}

// planCreate checks the user's limits, the name, the image and the save,
// then inserts the box (starting) and its operation (creating).
func (s *Service) planCreate(ctx context.Context, tx pgx.Tx, c Call, kind string, r CreateRequest, l limits) (*Box, *Operation, error) {
	var held, agents int
	var taken bool
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT agent), count(*) FILTER (WHERE agent),
 coalesce(bool_or(name = $2), false) FROM boxes WHERE user_id = $1`, c.UserID, r.Name).Scan(&held, &agents, &taken); err != nil {
		return nil, nil, fmt.Errorf("count boxes: %w", err)
	}
	if taken {
		return nil, nil, fmt.Errorf("name: the user has a box named %q already: %w", r.Name, ErrExists)
	}
	// An agent box is outside the user's max_boxes and running limit;
	// max_agent_boxes bounds all of the user's grants' boxes together
	// (Contract: Agent boxes and the user's limits; Agent boxes of a user).
	agent := AgentFrom(ctx)
	if agent != nil {
		if l.maxAgentBoxes > 0 && agents >= l.maxAgentBoxes {
			return nil, nil, fmt.Errorf("max_agent_boxes: the user's agents hold %d boxes and max_agent_boxes is %d; delete one first: %w",
				agents, l.maxAgentBoxes, ErrLimit)
		}
	} else {
		if held >= l.maxBoxes {
			return nil, nil, fmt.Errorf("max_boxes: the user holds %d boxes and max_boxes is %d; delete one first: %w", held, l.maxBoxes, ErrLimit)
		}
		if err := checkRunning(ctx, tx, c.UserID, "", l); err != nil {
			return nil, nil, err
		}
	}
	b := &Box{ID: newID("cb-"), UserID: c.UserID, Name: r.Name, State: Starting, seed: newSeed(), Agent: agent != nil}
	// A restore takes the deleted box's disk-level save when its host is
	// this api's (the fast path), else the newest snapshot of the name in
	// the state store, on any host (docs/state.md, "Box saves").
	restore, kept := "", false
	if r.Restore {
		var image, host string
		err := tx.QueryRow(ctx, "SELECT save_id, host, image FROM box_saves WHERE user_id = $1 AND name = $2", c.UserID, r.Name).Scan(&restore, &host, &image)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, fmt.Errorf("read the kept save: %w", err)
		}
		if err == nil && r.Image == "" {
			r.Image = image
		}
		if err == nil && s.hosts[host] != nil {
			b.Host, kept = host, true
		} else {
			snap, err := s.newestSnapshot(ctx, c.UserID, r.Name)
			if err != nil {
				return nil, nil, err
			}
			if snap == "" {
				return nil, nil, invalid("restore", "no save of a deleted box named %q is kept (Delete keeps a box's newest save; Save before Delete)", r.Name)
			}
			restore = stateRestore + snap
		}
	}
	if !kept {
		host, err := s.placement(ctx, tx)
		if err != nil {
			return nil, nil, err
		}
		b.Host = host
	}
	image, err := s.imageOn(ctx, b.Host, r.Image)
	if err != nil {
		return nil, nil, err
	}
	b.Image = image
	err = tx.QueryRow(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed, agent)
 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING created_at`, b.ID, b.UserID, b.Name, b.Image, b.State, b.Host, b.seed, b.Agent).Scan(&b.Created)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return nil, nil, fmt.Errorf("name: the user has a box named %q already: %w", r.Name, ErrExists)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("insert box: %w", err)
	}
	if agent != nil && agent.Inserted != nil {
		if err := agent.Inserted(ctx, tx, b.ID); err != nil {
			return nil, nil, err
		}
	}
	b.State = "" // so newOp records the starting state as a change
	op, err := s.newOp(ctx, tx, c, kind, b, PhaseCreating, Starting)
	if err != nil {
		return nil, nil, err
	}
	if restore != "" {
		op.restoreSave = restore
		if _, err := tx.Exec(ctx, "UPDATE box_operations SET restore_save = $2 WHERE id = $1", op.ID, restore); err != nil {
			return nil, nil, err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM box_saves WHERE user_id = $1 AND name = $2 AND $3", c.UserID, r.Name, kept); err != nil {
			return nil, nil, err
		}
	}
	return b, op, nil
}

// placement is the host holding the fewest boxes (by name on a tie).
func (s *Service) placement(ctx context.Context, tx pgx.Tx) (string, error) {
	counts := map[string]int{}
	rows, err := tx.Query(ctx, "SELECT host, count(*) FROM boxes GROUP BY host")
	if err != nil {
		return "", fmt.Errorf("count boxes by host: %w", err)
	}
	for rows.Next() {
		var h string
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			rows.Close()
			return "", err
		}
		counts[h] = n
	}
	rows.Close()
	best := s.names[0]
	for _, h := range s.names {
		if counts[h] < counts[best] {
			best = h
		}
	}
	return best, rows.Err()
}

// Ensure makes the box running: a hibernated one wakes (phase waking, and
// a hibernate under way is cancelled), a failed one boots (phase
// creating), and a user without boxes gets one named DefaultName when
// c.Box is "". A running box answers a nil operation; a create or ensure
// under way answers that operation. Errors: ErrNotFound, ErrBusy (another
// kind of operation is under way), ErrState (stale incarnation), ErrLimit.
func (s *Service) Ensure(ctx context.Context, c Call) (*Box, *Operation, error) {
	if c.Box == "" {
		if bs, err := listBoxes(ctx, s.pool, c.UserID); err == nil && len(bs) == 0 {
			b, op, err := s.begin(ctx, c, "ensure", false, func(ctx context.Context, tx pgx.Tx, l limits, _ *Box) (*Box, *Operation, error) {
				return s.planCreate(ctx, tx, c, "ensure", CreateRequest{Name: DefaultName}, l)
			})
			if !errors.Is(err, ErrExists) {
				return b, op, err
			}
		}
	}
	return s.begin(ctx, c, "ensure", true, func(ctx context.Context, tx pgx.Tx, l limits, b *Box) (*Box, *Operation, error) {
		if b.OperationID != "" {
			under, err := findOp(ctx, tx, "id = $1", b.OperationID)
			if err != nil || under == nil {
				return nil, nil, fmt.Errorf("box %s: read its operation: %v: %w", b.Name, err, ErrBusy)
			}
			switch under.Kind {
			case "create", "ensure":
				return b, under, nil
			case "hibernate":
				if err := s.cancel(ctx, tx, under, "cancelled: a wake came while it was under way"); err != nil {
					return nil, nil, err
				}
				b.OperationID = ""
			default:
				return nil, nil, busy(b)
			}
		}
		phase := PhaseWaking
		switch b.State {
		case Running:
			return b, nil, nil
		case Failed:
			phase = PhaseCreating
		}
		if !b.Agent { // an agent box skips the user's running limit
			if err := checkRunning(ctx, tx, c.UserID, b.ID, l); err != nil {
				return nil, nil, err
			}
		}
		op, err := s.newOp(ctx, tx, c, "ensure", b, phase, Starting)
		return b, op, err
	})
}

// cancel ends an operation under way as failed, with why.
func (s *Service) cancel(ctx context.Context, tx pgx.Tx, op *Operation, why string) error {
	err := tx.QueryRow(ctx, `UPDATE box_operations SET phase = 'failed', error = $2, ended_at = now()
 WHERE id = $1 AND ended_at IS NULL RETURNING ended_at`, op.ID, why).Scan(&op.Ended)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", op.ID, err)
	}
	op.Phase, op.Error = PhaseFailed, why
	if _, err := tx.Exec(ctx, "UPDATE boxes SET operation_id = NULL WHERE id = $1", op.BoxID); err != nil {
		return err
	}
	return addEvent(ctx, tx, op.UserID, op.BoxID, "", op)
}

// Hibernate freezes a running box, memory kept (phase snapshotting; state
// hibernating, then hibernated). Errors: ErrNotFound, ErrBusy, ErrState.
func (s *Service) Hibernate(ctx context.Context, c Call) (*Box, *Operation, error) {
	return s.simple(ctx, c, "hibernate", PhaseSnapshotting, Hibernating, Running)
}

// Save records a running or hibernated box's disk state (phase saving; the
// supervisor flushes a running box's file systems first), keeping only the
// newest save; the operation's total_bytes is the save's size. The box
// stays in its state: a hibernated one is not woken. Errors: as
// Hibernate's.
func (s *Service) Save(ctx context.Context, c Call) (*Box, *Operation, error) {
	return s.simple(ctx, c, "save", PhaseSaving, "", Running, Hibernated)
}

// simple begins an operation of one phase on a box in one of from.
func (s *Service) simple(ctx context.Context, c Call, kind, phase, state string, from ...string) (*Box, *Operation, error) {
	return s.begin(ctx, c, kind, true, func(ctx context.Context, tx pgx.Tx, _ limits, b *Box) (*Box, *Operation, error) {
		if err := busy(b); err != nil {
			return nil, nil, err
		}
		if err := needState(b, kind, from...); err != nil {
			return nil, nil, err
		}
		op, err := s.newOp(ctx, tx, c, kind, b, phase, state)
		return b, op, err
	})
}

// Upgrade moves a running box onto the latest image of its tier, keeping
// /home/user and /workspace: a save (phase saving), the rebase and boot
// (restoring), the identity and claim env of the new incarnation
// (restoring_files). Errors: as Hibernate's; ErrState when the box runs
// the latest image already.
func (s *Service) Upgrade(ctx context.Context, c Call) (*Box, *Operation, error) {
	return s.begin(ctx, c, "upgrade", true, func(ctx context.Context, tx pgx.Tx, _ limits, b *Box) (*Box, *Operation, error) {
		if err := busy(b); err != nil {
			return nil, nil, err
		}
		if err := needState(b, "upgrade", Running); err != nil {
			return nil, nil, err
		}
		latest, err := s.latestFor(ctx, b)
		if err != nil {
			return nil, nil, err
		}
		if latest == b.Image {
			return nil, nil, fmt.Errorf("box %s runs %s, the latest image of its tier: %w", b.Name, b.Image, ErrState)
		}
		op, err := s.newOp(ctx, tx, c, "upgrade", b, PhaseSaving, "")
		if err != nil {
			return nil, nil, err
		}
		op.image = latest
		_, err = tx.Exec(ctx, "UPDATE box_operations SET image = $2 WHERE id = $1", op.ID, latest)
		return b, op, err
	})
}

// Delete removes the box's machine and row (phase deleting), keeping its
// newest save for a Create with Restore. Errors: ErrNotFound, ErrBusy,
// ErrState.
func (s *Service) Delete(ctx context.Context, c Call) (*Box, *Operation, error) {
	return s.begin(ctx, c, "delete", true, func(ctx context.Context, tx pgx.Tx, _ limits, b *Box) (*Box, *Operation, error) {
		if err := busy(b); err != nil {
			return nil, nil, err
		}
		op, err := s.newOp(ctx, tx, c, "delete", b, PhaseDeleting, "")
		return b, op, err
	})
}

// List answers the user's boxes, oldest first.
func (s *Service) List(ctx context.Context, userID string) ([]*Box, error) {
	return listBoxes(ctx, s.pool, userID)
}

// Status answers the user's box (ErrNotFound when there is none) and its
// operation under way (nil for none).
func (s *Service) Status(ctx context.Context, userID, box string) (*Box, *Operation, error) {
	b, err := findBox(ctx, s.pool, userID, box, false)
	if err == nil {
		s.touch(ctx, b.ID)
	}
	if err != nil || b.OperationID == "" {
		return b, nil, err
	}
	op, err := findOp(ctx, s.pool, "id = $1", b.OperationID)
	return b, op, err
}

// Operation answers one of the user's operations (ErrNotFound for none).
func (s *Service) Operation(ctx context.Context, userID, opID string) (*Operation, error) {
	op, err := findOp(ctx, s.pool, "id = $1 AND user_id = $2", opID, userID)
	if err == nil && op == nil {
		err = fmt.Errorf("operation %s: %w", opID, ErrNotFound)
	}
	return op, err
}

// supervisorError wraps a supervisor's unavailability as this package's.
func supervisorError(err error) error {
	if errors.Is(err, sandbox.ErrUnavailable) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
