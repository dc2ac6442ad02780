package boxes

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// MaxLimit is the highest max_boxes or max_running (the columns' CHECK).
const MaxLimit = 64

// Limits are a user's box limits, counts of boxes (the users.max_boxes and
// max_running columns this package's migration adds; 1 and 1 for a new
// user). Create refuses past MaxBoxes boxes held; Create and Ensure refuse
// past MaxRunning boxes starting, running or hibernating (ErrLimit). The
// supervisor's tenant cap follows MaxBoxes (Contract: Boxes (api) ↔
// sandboxd, max_claims; OAuth for agents, "max_boxes + the agent boxes + 1").
type Limits struct {
	MaxBoxes   int `json:"max_boxes"`
	MaxRunning int `json:"max_running"`
}

// Check refuses a limit outside 0..MaxLimit, naming it.
func (l Limits) Check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"max_boxes", l.MaxBoxes}, {"max_running", l.MaxRunning}} {
		if f.v < 0 || f.v > MaxLimit {
			return fmt.Errorf("%s is %d: a limit is 0 to %d", f.name, f.v, MaxLimit)
		}
	}
	return nil
}

// LimitsOf answers the user's limits; users.ErrNotFound when there is no
// such user.
func LimitsOf(ctx context.Context, pool *pgxpool.Pool, userName string) (Limits, error) {
	var l Limits
	err := pool.QueryRow(ctx, "SELECT max_boxes, max_running FROM users WHERE name = $1", userName).Scan(&l.MaxBoxes, &l.MaxRunning)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("%w: %q", users.ErrNotFound, userName)
	}
	if err != nil {
		return l, fmt.Errorf("limits of %q: %w", userName, err)
	}
	return l, nil
}

// SetLimits sets the user's limits, taking effect at every api's next
// operation (each reads them in the transaction that begins one). A limit
// lowered below what the user holds stops nothing: it refuses the next
// create or wake. Errors: Check's, users.ErrNotFound.
func SetLimits(ctx context.Context, pool *pgxpool.Pool, userName string, l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	tag, err := pool.Exec(ctx, "UPDATE users SET max_boxes = $2, max_running = $3 WHERE name = $1", userName, l.MaxBoxes, l.MaxRunning)
	if err != nil {
		return fmt.Errorf("set limits of %q: %w", userName, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %q", users.ErrNotFound, userName)
	}
	return nil
}

// Held is how many boxes the user named userName holds (0 for no such
// user); an error only when the database cannot be read.
func Held(ctx context.Context, pool *pgxpool.Pool, userName string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, "SELECT count(*) FROM boxes b JOIN users u ON u.id = b.user_id WHERE u.name = $1", userName).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("boxes of %q: %w", userName, err)
	}
	return n, nil
}
