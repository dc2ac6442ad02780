// Package ratelimit bounds how often one key (a user name, a client
// address) may do something costly or guessable, such as a password
// sign-in. The counts live in PostgreSQL (table rate_limits), so every api
// on one database shares them: behind a balancer over n apis a client gets
// the limit once, not n times. No library keeps a token bucket in
// PostgreSQL; the bucket is the generic cell rate algorithm (GCRA, one
// timestamp per key: what golang.org/x/time/rate computes with a token
// count), one statement per take.
package ratelimit

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (table rate_limits); it refers to no
// other schema's tables.
var Schema = database.NewSchema("ratelimit_schema_migrations", migrations, "migrations")

// Limiter lets each key of its scope do at most Burst events at once and
// then one more every Window/Burst: Burst events in any Window, once the
// bucket has emptied. Build it with New; it is safe for concurrent use, and
// Limiters of one scope on one database (one per api) share their keys.
type Limiter struct {
	pool         *pgxpool.Pool
	scope        string
	window, each time.Duration // each: the emission interval, Window/Burst in whole µs
	now          func() time.Time

	mu    sync.Mutex
	swept time.Time
}

// New is a Limiter of burst events (at least 1) per window (at least 1 s)
// for every key of scope (the api.yaml key it serves, such as
// "console.sign_in.per_user"), reading the time from now (nil: time.Now).
// A bad value is an error naming it.
func New(pool *pgxpool.Pool, scope string, burst int, window time.Duration, now func() time.Time) (*Limiter, error) {
	if burst < 1 {
		return nil, fmt.Errorf("ratelimit: burst %d: must be at least 1", burst)
	}
	if window < time.Second {
		return nil, fmt.Errorf("ratelimit: window %s: must be at least 1s", window)
	}
	if now == nil {
		now = time.Now
	}
	// PostgreSQL keeps microseconds; the interval is rounded up to one, so
	// Burst takes never exceed Window.
	each := (window/time.Duration(burst) + time.Microsecond - 1).Truncate(time.Microsecond)
	return &Limiter{pool: pool, scope: scope, window: window, each: each, now: now, swept: now()}, nil
}

// Ticket is one event a key took; Return gives it back.
type Ticket struct {
	l   *Limiter
	key string
}

// Return gives the event back, as if it had not been taken (a sign-in that
// turned out right does not count against its user name), as far as the
// events taken since allow. Returning twice, or a zero Ticket, does nothing.
func (t *Ticket) Return(ctx context.Context) error {
	if t.l == nil {
		return nil
	}
	l := t.l
	t.l = nil
	_, err := l.pool.Exec(ctx, "UPDATE rate_limits SET tat = tat - $3::bigint * interval '1 microsecond' WHERE scope = $1 AND key = $2",
		l.scope, t.key, l.each.Microseconds())
	if err != nil {
		return fmt.Errorf("ratelimit %s: return: %w", l.scope, err)
	}
	return nil
}

// take is one GCRA step: the key's tat moves to max(tat, now) + each when
// that lies within window of now; otherwise nothing changes and no row
// comes back.
const take = `INSERT INTO rate_limits AS r (scope, key, tat) VALUES ($1, $2, $3::timestamptz + $4::bigint * interval '1 microsecond')
ON CONFLICT (scope, key) DO UPDATE SET tat = greatest(r.tat, $3::timestamptz) + $4::bigint * interval '1 microsecond'
WHERE greatest(r.tat, $3::timestamptz) + $4::bigint * interval '1 microsecond' <= $3::timestamptz + $5::bigint * interval '1 microsecond'
RETURNING tat`

// Take takes one event of key now. It answers the Ticket and 0 when the
// key had one left; otherwise nothing is taken and it answers how long
// until the key has one (rounded up to a whole second, at least 1 s, for
// a Retry-After header). An error is the database's: nothing was decided.
func (l *Limiter) Take(ctx context.Context, key string) (Ticket, time.Duration, error) {
	now := l.now()
	if err := l.sweep(ctx, now); err != nil {
		return Ticket{}, 0, err
	}
	var tat time.Time
	err := l.pool.QueryRow(ctx, take, l.scope, key, now, l.each.Microseconds(), l.window.Microseconds()).Scan(&tat)
	if err == nil {
		return Ticket{l: l, key: key}, 0, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Ticket{}, 0, fmt.Errorf("ratelimit %s: take: %w", l.scope, err)
	}
	err = l.pool.QueryRow(ctx, "SELECT tat FROM rate_limits WHERE scope = $1 AND key = $2", l.scope, key).Scan(&tat)
	if errors.Is(err, pgx.ErrNoRows) {
		// Swept in between by an api whose clock is ahead: full again.
		return Ticket{}, time.Second, nil
	}
	if err != nil {
		return Ticket{}, 0, fmt.Errorf("ratelimit %s: read: %w", l.scope, err)
	}
	wait := tat.Add(l.each).Sub(now) - l.window
	return Ticket{}, max(time.Second, (wait + time.Second - 1).Truncate(time.Second)), nil
}

// sweep deletes, at most once a minute per Limiter, the scope's rows whose
// bucket is full again: a full bucket is what a missing row means, so
// nothing changes for them, and the table holds only keys active within
// the last Window.
func (l *Limiter) sweep(ctx context.Context, now time.Time) error {
	l.mu.Lock()
	due := now.Sub(l.swept) >= time.Minute
	if due {
		l.swept = now
	}
	l.mu.Unlock()
	if !due {
		return nil
	}
	if _, err := l.pool.Exec(ctx, "DELETE FROM rate_limits WHERE scope = $1 AND tat <= $2", l.scope, now); err != nil {
		return fmt.Errorf("ratelimit %s: sweep: %w", l.scope, err)
	}
	return nil
}
