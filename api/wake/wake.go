// Package wake is scheduled wake (Contract: Scheduled wake, Idle user
// boxes "it stays up while its scheduled wake is on (SleepAt ahead)";
// docs/wake.md): a box may carry schedules, each a one-time wake or a cron
// expression read in a time zone, with a keep-up time after each wake.
// The Scheduler wakes a box on time with exactly one api acting across
// replicas (each due row is taken FOR UPDATE SKIP LOCKED in the
// transaction that moves it on), and SleepAt tells idle hibernate to
// leave the box up until then.
package wake

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (box_schedules); they refer to boxes
// and users (boxes.Schema first).
var Schema = database.NewSchema("wake_schema_migrations", migrations, "migrations")

// MaxKeepUp bounds a schedule's keep-up time (client.MaxKeepUp, the rule
// the CLI checks with too).
const MaxKeepUp = client.MaxKeepUp

// MaxPerBox bounds a box's schedules.
const MaxPerBox = 16

// Spec is a schedule as set: At or Cron (five fields, robfig/cron's
// standard parser: minute hour day-of-month month day-of-week, and the
// @daily-style descriptors), TimeZone (IANA; "" is UTC) and KeepUp. Their
// grammars are api/client's (ParseCron, TimeZone, CheckKeepUp), which
// the CLI checks with before any call.
type Spec struct {
	At       time.Time
	Cron     string
	TimeZone string
	KeepUp   time.Duration
}

// Schedule is a stored schedule.
type Schedule struct {
	ID       int64         `json:"id"`
	BoxID    string        `json:"box_id"`
	At       *time.Time    `json:"at,omitempty"`
	Cron     string        `json:"cron,omitempty"`
	TimeZone string        `json:"time_zone"`
	KeepUp   time.Duration `json:"keep_up_ns"`
	// Next is the next wake; nil once a one-time wake is done.
	Next *time.Time `json:"next_at,omitempty"`
	// SleepAt is the last wake's end of keep-up; nil before a wake.
	SleepAt *time.Time `json:"sleep_at,omitempty"`
}

// ErrInvalid is what every refused spec is (errors.Is); the error is a
// *FieldError naming the field.
var ErrInvalid = errors.New("invalid schedule")

// FieldError is a spec that breaks a rule: Field is the spec's field as
// the api's callers name it ("at", "cron", "time_zone", "keep_up"; "box"
// for a box with MaxPerBox schedules), Rule what is wrong with its value,
// a sentence's end a person reads ("\"Mars/Olympus\" is not an IANA time
// zone, such as Europe/Berlin"), and Detail the parser's own words ("" for
// none), for the CLI and the MCP tools, which print Error. The console
// says Rule after the field's label (api/wake's Console).
type FieldError struct {
	Field, Rule, Detail string
}

// Error is "invalid schedule: FIELD RULE[: DETAIL]".
func (e *FieldError) Error() string {
	s := ErrInvalid.Error() + ": " + e.Field + " " + e.Rule
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes a FieldError ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, rule string) error { return &FieldError{Field: field, Rule: rule} }

// ErrNotFound is a box or schedule the user does not have.
var ErrNotFound = errors.New("no such box or schedule")

// zone is the IANA time zone name ("" is UTC), or a FieldError of
// time_zone.
func zone(name string) (*time.Location, error) {
	loc, err := client.TimeZone(name)
	if err != nil {
		return nil, invalid("time_zone", err.Error())
	}
	return loc, nil
}

// LocalLayout is the form of a wall-clock time ParseLocal reads: an HTML
// datetime-local input's value.
const LocalLayout = "2006-01-02T15:04"

// ParseLocal reads value, a wall-clock time (LocalLayout, seconds
// optional), in the time zone name ("" is UTC): the console's "wake at".
// Errors are FieldErrors of time_zone or at.
func ParseLocal(value, name string) (time.Time, error) {
	loc, err := zone(name)
	if err != nil {
		return time.Time{}, err
	}
	for _, layout := range []string{LocalLayout, LocalLayout + ":05"} {
		if t, err := time.ParseInLocation(layout, value, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, invalid("at", fmt.Sprintf("%q is not a date and time, such as 2026-12-08T07:30", value))
}

// next is spec's first wake after now, or a FieldError.
func (sp Spec) next(now time.Time) (time.Time, *time.Location, error) {
	loc, err := zone(sp.TimeZone)
	if err != nil {
		return time.Time{}, nil, err
	}
	if err := client.CheckKeepUp(sp.KeepUp); err != nil {
		return time.Time{}, nil, invalid("keep_up", err.Error())
	}
	switch {
	case sp.Cron != "" && !sp.At.IsZero():
		return time.Time{}, nil, invalid("at", "and a cron expression were both given: give one")
	case sp.Cron != "":
		s, err := client.ParseCron(sp.Cron)
		if err != nil {
			return time.Time{}, nil, &FieldError{Field: "cron", Rule: client.CronRule(sp.Cron), Detail: err.Error()}
		}
		n := s.Next(now.In(loc))
		if n.IsZero() {
			return time.Time{}, nil, invalid("cron", fmt.Sprintf("%q never comes", sp.Cron))
		}
		return n, loc, nil
	case sp.At.IsZero():
		return time.Time{}, nil, invalid("at", "is missing: give a time, or a cron expression")
	case !sp.At.After(now):
		return time.Time{}, nil, invalid("at", sp.At.In(loc).Format("Mon 2 Jan 2006 15:04 MST")+" is past: give a time ahead")
	}
	return sp.At, loc, nil
}

// Store keeps the schedules.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewStore is the schedules on pool; now is the clock (nil: time.Now).
func NewStore(pool *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{pool: pool, now: now}
}

const columns = "id, box_id, at, coalesce(cron, ''), time_zone, keep_up_seconds, next_at, sleep_at"

func scan(r pgx.Row) (Schedule, error) {
	var s Schedule
	var secs int64
	err := r.Scan(&s.ID, &s.BoxID, &s.At, &s.Cron, &s.TimeZone, &secs, &s.Next, &s.SleepAt)
	s.KeepUp = time.Duration(secs) * time.Second
	return s, err
}

// BoxID is the id of user's box ref, its name or its id; ErrNotFound
// for a box the user does not have.
func (st *Store) BoxID(ctx context.Context, user, ref string) (string, error) {
	var id string
	err := st.pool.QueryRow(ctx, "SELECT id FROM boxes WHERE user_id = $1 AND (id = $2 OR name = $2)", user, ref).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: box %q", ErrNotFound, ref)
	}
	return id, err
}

// Set adds a schedule to user's box boxID. Errors: ErrInvalid naming the
// field, ErrNotFound for a box the user does not have, ErrInvalid past
// MaxPerBox schedules.
func (st *Store) Set(ctx context.Context, user, boxID string, sp Spec) (Schedule, error) {
	if sp.TimeZone == "" {
		sp.TimeZone = "UTC"
	}
	next, _, err := sp.next(st.now())
	if err != nil {
		return Schedule{}, err
	}
	var out Schedule
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		var n int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM box_schedules WHERE box_id = b.id) FROM boxes b
			WHERE b.id = $1 AND b.user_id = $2 FOR UPDATE`, boxID, user).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: box %q", ErrNotFound, boxID)
		}
		if err != nil {
			return err
		}
		if n >= MaxPerBox {
			return invalid("box", fmt.Sprintf("has %d schedules, the most a box may have: clear one first", MaxPerBox))
		}
		var at *time.Time
		var cronExpr *string
		if sp.Cron != "" {
			cronExpr = &sp.Cron
		} else {
			at = &sp.At
		}
		out, err = scan(tx.QueryRow(ctx, `INSERT INTO box_schedules (box_id, user_id, at, cron, time_zone, keep_up_seconds, next_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+columns, boxID, user, at, cronExpr, sp.TimeZone, int64(sp.KeepUp/time.Second), next))
		return err
	})
	return out, err
}

// List answers user's schedules of box boxID ("" for all their boxes),
// oldest first.
func (st *Store) List(ctx context.Context, user, boxID string) ([]Schedule, error) {
	rows, err := st.pool.Query(ctx, "SELECT "+columns+" FROM box_schedules WHERE user_id = $1 AND ($2 = '' OR box_id = $2) ORDER BY id", user, boxID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) { return scan(r) })
}

// Clear removes user's schedule id of box boxID, or every schedule of the
// box when id is 0, answering how many went.
func (st *Store) Clear(ctx context.Context, user, boxID string, id int64) (int64, error) {
	tag, err := st.pool.Exec(ctx, "DELETE FROM box_schedules WHERE user_id = $1 AND box_id = $2 AND ($3 = 0 OR id = $3)", user, boxID, id)
	if err != nil {
		return 0, err
	}
	if id != 0 && tag.RowsAffected() == 0 {
		return 0, fmt.Errorf("%w: schedule %d of box %q", ErrNotFound, id, boxID)
	}
	return tag.RowsAffected(), nil
}

// KeepUp says whether box boxID has a schedule whose SleepAt is ahead:
// idle hibernate leaves it up.
func (st *Store) KeepUp(ctx context.Context, boxID string) (bool, error) {
	var up bool
	err := st.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM box_schedules WHERE box_id = $1 AND sleep_at > $2)", boxID, st.now()).Scan(&up)
	return up, err
}

// Waker wakes user's box boxID (boxes.Service.Ensure); requestID makes a
// repeat of one fire do nothing more.
type Waker func(ctx context.Context, user, boxID, requestID string) error

// Scheduler wakes the boxes whose schedules are due.
type Scheduler struct {
	st   *Store
	wake Waker
	log  *slog.Logger
	// passes counts Run's completed passes (Passes).
	passes atomic.Uint64
}

// NewScheduler wakes through wake the boxes of st's due schedules.
func NewScheduler(st *Store, wake Waker, log *slog.Logger) *Scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{st: st, wake: wake, log: log}
}

// wakeWithin bounds one wake's ask (the operation it starts runs on).
const wakeWithin = 15 * time.Second

// batch bounds the schedules one Fire takes.
const batch = 32

// Fire wakes the boxes of every schedule due now, answering how many it
// woke. Each due row is locked (FOR UPDATE SKIP LOCKED) in the
// transaction that moves it to its next wake and sets its SleepAt, and
// the wake is asked before that commits: another api skips the row, a
// wake that fails leaves it due for the next Fire, and a crash after the
// wake repeats it with the same request id, which does nothing more.
func (sc *Scheduler) Fire(ctx context.Context) (int, error) {
	now := sc.st.now()
	woke := 0
	err := pgx.BeginFunc(ctx, sc.st.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+columns+", user_id::text FROM box_schedules WHERE next_at <= $1 ORDER BY next_at LIMIT $2 FOR UPDATE SKIP LOCKED", now, batch)
		if err != nil {
			return err
		}
		type due struct {
			Schedule
			user string
		}
		ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
			var d due
			var secs int64
			err := r.Scan(&d.ID, &d.BoxID, &d.At, &d.Cron, &d.TimeZone, &secs, &d.Next, &d.SleepAt, &d.user)
			d.KeepUp = time.Duration(secs) * time.Second
			return d, err
		})
		if err != nil {
			return err
		}
		for _, d := range ds {
			req := fmt.Sprintf("wake-%d-%d", d.ID, d.Next.Unix())
			// Bounded: a box delete waiting on this row while the wake
			// waits on the box's row would otherwise hold both.
			wctx, cancel := context.WithTimeout(ctx, wakeWithin)
			err := sc.wake(wctx, d.user, d.BoxID, req)
			cancel()
			if err != nil {
				sc.log.Warn("wake: the box was not woken; the next pass tries again", "box", d.BoxID, "schedule", d.ID, "err", err)
				continue
			}
			var next *time.Time
			if d.Cron != "" {
				if n, _, err := (Spec{Cron: d.Cron, TimeZone: d.TimeZone}).next(now); err == nil {
					next = &n
				}
			}
			if _, err := tx.Exec(ctx, "UPDATE box_schedules SET next_at = $2, sleep_at = $3 WHERE id = $1", d.ID, next, now.Add(d.KeepUp)); err != nil {
				return err
			}
			sc.log.Info("wake: box woken on schedule", "box", d.BoxID, "schedule", d.ID, "sleep_at", now.Add(d.KeepUp))
			woke++
		}
		return nil
	})
	return woke, err
}

// Run fires every tick until ctx ends.
func (sc *Scheduler) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := sc.Fire(ctx); err != nil && ctx.Err() == nil {
			sc.log.Warn("wake: a pass failed", "err", err)
		}
		sc.passes.Add(1)
	}
}

// Passes is how many passes Run has completed, each a Fire that has
// answered, failed or not. A pass completed is one whose wakes were asked
// for: a test that set the clock waits for the count to grow by two (the
// pass under way may have read the clock before it was set) to know a
// pass has looked at the new time, and waits on that instead of on
// wakeEvery's ticks.
func (sc *Scheduler) Passes() uint64 { return sc.passes.Load() }
