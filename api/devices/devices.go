// Package devices is the user's side of the device tokens: the list, a
// revoke, and sign out everywhere, for the console (its Devices section and
// JSON calls) and for gRPC (cocoonbox.control.v1.Account).
//
// Contract: Browser sign-in and device tokens.
package devices

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// ErrNotFound is a device of another user or one already gone.
var ErrNotFound = errors.New("no such device")

// Device is one browser sign-in, as GET /cb/api/devices answers it.
type Device struct {
	ID        string     `json:"id"`     // dev_ + 16 hex
	Client    string     `json:"client"` // cocoonbox-cli or cocoonbox-app
	Label     string     `json:"label"`  // the sign-in's device_name
	CreatedAt time.Time  `json:"created_at"`
	UsedAt    *time.Time `json:"used_at"` // null until first used; written at most once a minute
}

// SignIns is what sign out everywhere ends besides the device tokens, each
// in the caller's transaction: the console's sessions, the personal token.
type SignIns interface {
	EndSessions(ctx context.Context, tx pgx.Tx, userID string) error
	RevokePersonal(ctx context.Context, tx pgx.Tx, userID string) error
}

// Store reads and revokes device tokens. After a commit it calls reload for
// the user, so this api's token index drops what is gone at once (the
// NOTIFY on users.Channel tells the other apis).
type Store struct {
	pool    *pgxpool.Pool
	signIns SignIns
	reload  func(ctx context.Context, userID string) error
	hub     hub
}

// NewStore is a store on pool. reload makes this api's token index agree
// with the database for one user and ends the calls on tokens that are gone.
func NewStore(pool *pgxpool.Pool, signIns SignIns, reload func(ctx context.Context, userID string) error) *Store {
	return &Store{pool: pool, signIns: signIns, reload: reload}
}

// List answers userID's devices, newest first.
func (s *Store) List(ctx context.Context, userID string) ([]Device, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, client, label, created_at, used_at FROM user_tokens
		WHERE user_id = $1 ORDER BY created_at DESC, id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Device, error) {
		var d Device
		err := r.Scan(&d.ID, &d.Client, &d.Label, &d.CreatedAt, &d.UsedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return list, nil
}

// Revoke revokes userID's device id at once. ErrNotFound for a device of
// another user or one already gone.
func (s *Store) Revoke(ctx context.Context, userID, id string) error {
	return s.change(ctx, userID, func(ctx context.Context, tx pgx.Tx) error { return RevokeInTx(ctx, tx, userID, id) })
}

// change runs fn, a change of userID's sign-ins, in one transaction, then
// does what follows its commit (after). The caller's own token may be
// among those fn revokes: the commit reaches every api's index (this
// one's too, through its NOTIFY listener) and ends the calls on them, the
// caller's with them, maybe while the COMMIT's answer is still on its
// way. So the change runs to its end on a context that the calling call's
// end does not cancel. fn's error is returned as it is.
func (s *Store) change(ctx context.Context, userID string, fn func(context.Context, pgx.Tx) error) error {
	ctx = context.WithoutCancel(ctx)
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(ctx, tx) }); err != nil {
		return err
	}
	return s.after(ctx, userID)
}

// Changed tells this api's WatchDevices streams of userID that the user's
// devices changed on some api (the cocoonbox_users listener calls it).
func (s *Store) Changed(userID string) { s.hub.changed(userID) }

// after runs once a change of userID's sign-ins committed. The reload may
// end the very call that asked for the change (sign out everywhere, a
// device revoking itself), so it runs on a context that call's end does not cancel.
func (s *Store) after(ctx context.Context, userID string) error {
	s.hub.changed(userID)
	return s.reload(context.WithoutCancel(ctx), userID)
}

// RevokeInTx deletes userID's device id in tx and notifies every api on
// commit. ErrNotFound for a device of another user or one already gone.
func RevokeInTx(ctx context.Context, tx pgx.Tx, userID, id string) error {
	tag, err := tx.Exec(ctx, `DELETE FROM user_tokens WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return fmt.Errorf("revoke device %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return users.Notify(ctx, tx, userID)
}

// SignOutEverywhere ends every sign-in of userID in one transaction: the
// console sessions, the personal token and every device token; once it
// commits every api drops them and the calls open on them end.
func (s *Store) SignOutEverywhere(ctx context.Context, userID string) error {
	err := s.change(ctx, userID, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.signIns.EndSessions(ctx, tx, userID); err != nil {
			return fmt.Errorf("end the console sessions: %w", err)
		}
		if err := s.signIns.RevokePersonal(ctx, tx, userID); err != nil {
			return fmt.Errorf("revoke the personal token: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM user_tokens WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("revoke the device tokens: %w", err)
		}
		return users.Notify(ctx, tx, userID)
	})
	if err != nil {
		return fmt.Errorf("sign out everywhere: %w", err)
	}
	return nil
}

// RevokePersonal revokes userID's personal token at once (done also when
// there is none); the device tokens stay.
func (s *Store) RevokePersonal(ctx context.Context, userID string) error {
	return s.change(ctx, userID, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.signIns.RevokePersonal(ctx, tx, userID); err != nil {
			return fmt.Errorf("revoke the personal token: %w", err)
		}
		return users.Notify(ctx, tx, userID)
	})
}
