package signup

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// qenv is signup on a fresh database, without a server: the tests of
// admission and arrival that reach into the package (its hooks, its
// entries). The HTTP side's tests run on the api as built (api_env_test.go).
type qenv struct {
	t     *testing.T
	db    *dbtest.DB
	s     *Signup
	users *users.Store
	ctx   context.Context
}

func newQueueEnv(t *testing.T) *qenv {
	t.Helper()
	db := dbtest.New(t, users.Schema, console.Schema, ratelimit.Schema, Schema)
	e := &qenv{t: t, db: db, ctx: context.Background()}
	e.users = users.NewStore(db.Pool)
	e.users.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	e.s = newSignup(db.Pool, e.users)
	return e
}

// newSignup is an api's signup on pool, as apiserver builds it but for the
// console's session (no HTTP here).
func newSignup(pool *pgxpool.Pool, us *users.Store) *Signup {
	return New(Deps{Pool: pool, Log: slog.New(slog.DiscardHandler), DeleteUser: us.Delete})
}

// exec runs SQL on the test's database.
func (e *qenv) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.db.Pool.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// open opens signup: enabled, not invite-only, seats and the brake given.
func (e *qenv) open(seats, hourly int) {
	e.t.Helper()
	e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = $1, hourly_accounts = $2", seats, hourly)
}

func (e *qenv) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *qenv) seatsUsed() int {
	return e.count("SELECT count(*) FROM users WHERE NOT admin AND disabled_at IS NULL")
}

// person is the arrival of GitHub account n.
func person(n int) Arrival {
	return Arrival{IdP: "github", Subject: fmt.Sprint(1000 + n), Login: fmt.Sprintf("Person%d", n),
		Email: fmt.Sprintf("p%d@example.com", n), EmailVerified: true}
}

func (e *qenv) arrive(a Arrival) Outcome {
	e.t.Helper()
	out, err := e.s.Arrive(e.ctx, a)
	if err != nil {
		e.t.Fatalf("Arrive(%s): %v", a.Login, err)
	}
	return out
}
