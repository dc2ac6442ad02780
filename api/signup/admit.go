package signup

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// AdmitTimeout bounds one admission pass; it runs past its caller's
// cancel (a browser that went away), not forever.
const AdmitTimeout = 30 * time.Second

// AdmitEvery is how often every api runs admission with no trigger
// (Contract: "and every 5 min").
const AdmitEvery = 5 * time.Minute

// entry is a waiting signup_queue row, as admission reads it.
type entry struct {
	ID, IdP, Subject, Login, Email string
	EmailVerified                  bool
}

// Admit is one admission pass (Contract: Sign-in with GitHub and signup,
// "Admission locks the settings row, counts the seats in use and the
// accounts admitted in the last hour, and admits the oldest waiting people
// into the free seats within the hourly brake, under that lock"). Every
// api runs it at once without harm: the settings row's lock makes them
// take turns, and each sees the accounts the one before made. It runs on
// a context detached from ctx's cancel (bounded by AdmitTimeout), and each
// person in a savepoint, so one failure (logged) leaves the others
// admitted. It answers the ids of the accounts made.
func (s *Signup) Admit(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AdmitTimeout)
	defer cancel()
	var admitted []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		admitted = nil
		set, err := readSettings(ctx, tx, true)
		if err != nil {
			return err
		}
		if !set.Enabled {
			return nil
		}
		var used, lastHour int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM users WHERE NOT admin AND disabled_at IS NULL),
			(SELECT count(*) FROM signup_admissions WHERE admitted_at > now() - interval '1 hour')`).Scan(&used, &lastHour); err != nil {
			return fmt.Errorf("count the seats: %w", err)
		}
		free := min(set.Seats-used, set.HourlyAccounts-lastHour)
		var failed []string
		for free > 0 {
			next, err := waiting(ctx, tx, free, failed)
			if err != nil {
				return err
			}
			if len(next) == 0 {
				break
			}
			for _, e := range next {
				if err := s.admitOne(ctx, tx, e, set); err != nil {
					s.log.ErrorContext(ctx, "signup admission: a person not admitted; the others go on", "queue_id", e.ID, "login", e.Login, "err", err)
					failed = append(failed, e.ID)
					continue
				}
				admitted = append(admitted, e.ID)
				free--
			}
		}
		// The brake looks one hour back; older rows are kept a day, to read.
		_, err = tx.Exec(ctx, "DELETE FROM signup_admissions WHERE admitted_at < now() - interval '1 day'")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("signup admission: %w", err)
	}
	for _, id := range admitted {
		s.log.InfoContext(ctx, "signup: admitted", "user", id)
	}
	return admitted, nil
}

// admitLogged runs Admit, logging a failure: for the triggers whose caller
// has nothing to do with admission's outcome.
func (s *Signup) admitLogged(ctx context.Context, why string) {
	if _, err := s.Admit(ctx); err != nil {
		s.log.ErrorContext(ctx, "signup admission failed", "trigger", why, "err", err)
	}
}

// waiting answers at most n waiting people, oldest first with those put at
// the front (an invite, an admin) before the rest, skipping the ids in skip.
// Their rows stay locked until admission commits: an admin's reject or a
// leave between this read and the account waits, and then finds the entry
// admitted (before, admission marked admitted over a reject it had answered).
func waiting(ctx context.Context, tx pgx.Tx, n int, skip []string) ([]entry, error) {
	if skip == nil {
		skip = []string{}
	}
	rows, err := tx.Query(ctx, `SELECT id, idp, subject, login, email, email_verified FROM signup_queue
		WHERE status = 'waiting' AND NOT (id::text = ANY($2)) ORDER BY front DESC, created_at, id LIMIT $1 FOR UPDATE`, n, skip)
	if err != nil {
		return nil, fmt.Errorf("read the queue: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		err := r.Scan(&e.ID, &e.IdP, &e.Subject, &e.Login, &e.Email, &e.EmailVerified)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the queue: %w", err)
	}
	return list, nil
}

// admitOne makes e's account in a savepoint of tx (Contract: "Admitting
// makes the account at once: users.idp github, the username from the
// GitHub login lowercased and cleaned to the user name grammar with -2,
// -3, … on a clash (no rename), its own gw daily cap, and max_agent_boxes;
// the identity is linked"). The account's id is the entry's, so an account
// a failed attempt left is taken up, not made twice.
func (s *Signup) admitOne(ctx context.Context, tx pgx.Tx, e entry, set Settings) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	defer sp.Rollback(ctx)
	if s.beforeAccount != nil {
		if err := s.beforeAccount(e.ID); err != nil {
			return err
		}
	}
	var exists bool
	if err := sp.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)", e.ID).Scan(&exists); err != nil {
		return fmt.Errorf("read the account: %w", err)
	}
	if !exists {
		name, err := freeName(ctx, sp, e.Login, e.Subject)
		if err != nil {
			return err
		}
		var maxAgent *int
		if set.MaxAgentBoxes > 0 {
			maxAgent = &set.MaxAgentBoxes
		}
		if _, err := sp.Exec(ctx, `INSERT INTO users (id, name, password_hash, admin, idp, max_agent_boxes, daily_cap_micros)
			VALUES ($1, $2, NULL, false, $3, $4, $5)`, e.ID, name, e.IdP, maxAgent, set.DailyCapMicros); err != nil {
			return fmt.Errorf("make the account %q: %w", name, err)
		}
	}
	var linked string
	err = sp.QueryRow(ctx, `INSERT INTO identities (idp, subject, user_id, email, email_verified) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (idp, subject) DO UPDATE SET email = identities.email RETURNING user_id`,
		e.IdP, e.Subject, e.ID, e.Email, e.EmailVerified).Scan(&linked)
	if err != nil {
		return fmt.Errorf("link the identity: %w", err)
	}
	if linked != e.ID {
		return fmt.Errorf("the %s identity %s is linked to another account (%s)", e.IdP, e.Subject, linked)
	}
	if _, err := sp.Exec(ctx, "UPDATE signup_queue SET status = 'admitted', user_id = id WHERE id = $1", e.ID); err != nil {
		return fmt.Errorf("mark admitted: %w", err)
	}
	if _, err := sp.Exec(ctx, "INSERT INTO signup_admissions (user_id) VALUES ($1)", e.ID); err != nil {
		return fmt.Errorf("log the admission: %w", err)
	}
	// Admission spends the person's cb_queue secrets: from now on they
	// answer the status alone.
	if _, err := sp.Exec(ctx, "UPDATE signup_queue_cookies SET spent_at = now() WHERE queue_id = $1 AND spent_at IS NULL", e.ID); err != nil {
		return fmt.Errorf("spend the queue cookies: %w", err)
	}
	return sp.Commit(ctx)
}

// baseName is the user name a GitHub login becomes before a clash
// suffix: CleanLogin's, or, for a login that cleans to nothing or to a
// reserved name, "gh-" and the GitHub account's numeric id (subject).
func baseName(login, subject string) string {
	if name, err := CleanLogin(login); err == nil {
		return name
	}
	if _, err := strconv.ParseUint(subject, 10, 64); err != nil {
		subject = "0"
	}
	return "gh-" + subject
}

// freeName is the first free name of login's: its clean form, then -2,
// -3, … (the base cut so the suffix fits 39 characters).
func freeName(ctx context.Context, tx pgx.Tx, login, subject string) (string, error) {
	base := baseName(login, subject)
	for i := 1; i <= 10000; i++ {
		name := base
		if i > 1 {
			suffix := "-" + strconv.Itoa(i)
			name = base[:min(len(base), 39-len(suffix))] + suffix
		}
		if err := users.CheckName(name); err != nil {
			return "", err
		}
		var taken bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM users WHERE name = $1)", name).Scan(&taken); err != nil {
			return "", fmt.Errorf("find a free name: %w", err)
		}
		if !taken {
			return name, nil
		}
	}
	return "", errors.New("no free name among 10000 of " + base)
}

// AdmitNow is an admin's admit of one queue entry (POST
// /cb/api/queue/{id}/admit): the account is made under admission's lock
// but past the seats, the brake and enabled. Errors: ErrNotFound,
// ErrAdmitted.
func (s *Signup) AdmitNow(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AdmitTimeout)
	defer cancel()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		set, err := readSettings(ctx, tx, true)
		if err != nil {
			return err
		}
		var e entry
		var status string
		err = tx.QueryRow(ctx, "SELECT id, idp, subject, login, email, email_verified, status FROM signup_queue WHERE id::text = $1 FOR UPDATE", id).
			Scan(&e.ID, &e.IdP, &e.Subject, &e.Login, &e.Email, &e.EmailVerified, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		if status == "admitted" {
			return fmt.Errorf("%w: %s", ErrAdmitted, id)
		}
		return s.admitOne(ctx, tx, e, set)
	})
}
