package signup

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// Errors of the store, each wrapped with what it concerns.
var (
	ErrNotFound = errors.New("not found")
	ErrAdmitted = errors.New("already admitted")
	ErrRejected = errors.New("rejected by an admin")
)

// Deps are what signup's queue, admission and admin pages are built from.
type Deps struct {
	Pool *pgxpool.Pool
	Log  *slog.Logger
	// Session answers the console session's user of a request.
	Session func(*http.Request) (users.User, bool)
	// ClearSession expires the console session's cookie in an answer (a self-delete).
	ClearSession func(http.ResponseWriter)
	// DeleteUser is the admin delete (cocoonbox-api users delete's), which
	// a self-delete runs.
	DeleteUser func(ctx context.Context, name string) error
	// Secure marks the cb_queue cookie Secure (the api is served over https).
	Secure bool
	// PushCap, when set, sets a user's daily cap at gw in the transaction
	// of an admin's change of it (api/usage's PushCap): its error rolls
	// the change back.
	PushCap func(ctx context.Context, tx pgx.Tx, user string) error
}

// Signup is the queue, admission, invites, invite-scoped tokens and the
// admin's and the queue's pages (Contract: Sign-in with GitHub and signup).
// Build it with New; Arrive is what the GitHub sign-in's callback calls for
// an identity no user has.
type Signup struct {
	pool         *pgxpool.Pool
	log          *slog.Logger
	session      func(*http.Request) (users.User, bool)
	clearSession func(http.ResponseWriter)
	deleteUser   func(ctx context.Context, name string) error
	secure       bool
	pushCap      func(ctx context.Context, tx pgx.Tx, user string) error
	// wake asks Run for an admission pass (Trigger); one pending is enough.
	wake chan struct{}
	// beforeAccount, when a test sets it, runs before each account is made
	// (in its savepoint); an error fails that person.
	beforeAccount func(queueID string) error
}

// New is the signup of d.
func New(d Deps) *Signup {
	return &Signup{pool: d.Pool, log: d.Log, session: d.Session, clearSession: d.ClearSession,
		deleteUser: d.DeleteUser, secure: d.Secure, pushCap: d.PushCap, wake: make(chan struct{}, 1)}
}

// Trigger asks Run for an admission pass soon, without waiting for it: for
// a user deleted or disabled anywhere (the token index's change of a user,
// which the admin CLI's NOTIFY reaches too).
func (s *Signup) Trigger() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run admits on each Trigger and every AdmitEvery until ctx ends.
func (s *Signup) Run(ctx context.Context) {
	t := time.NewTicker(AdmitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.admitLogged(ctx, "every "+AdmitEvery.String())
		case <-s.wake:
			s.admitLogged(ctx, "a user changed")
		}
	}
}
