package signup

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Arrival is a GitHub sign-in of an identity no user has, as the callback
// hands it to signup's Arrive (docs/signup.md).
type Arrival struct {
	IdP, Subject, Login, Email string
	EmailVerified              bool
	// Invite is the cbi_ code the sign-in carried (begin's invite), or "".
	Invite string
}

// Outcome is Arrive's answer: exactly one of UserID, QueueID (with its
// QueueSecret) and Refusal is set.
type Outcome struct {
	// UserID: admitted, now or before: the callback signs them in.
	UserID string
	// QueueID: queued: the callback sets the cb_queue cookie of
	// QueueSecret, a new secret of this entry's, and goes to /cb/queue.
	QueueID, QueueSecret string
	// Refusal is a login_error code of the contract (signup_closed,
	// email_unverified, email_not_allowed, invite_required, declined, ...).
	Refusal string
}

// The login_error codes Arrive refuses with (Contract: Sign-in with GitHub
// and signup, "Failures and refusals go to /cb/?login_error=<code>").
const (
	RefuseClosed        = "signup_closed"
	RefuseUnverified    = "email_unverified"
	RefuseNotAllowed    = "email_not_allowed"
	RefuseInviteMissing = "invite_required"
	RefuseDeclined      = "declined"
)

// Arrive takes a new identity (Contract: "A new identity is refused when
// signup is off, the primary email is unverified, the email is outside the
// allowlist, signup is invite-only and the sign-in carries no usable
// invite, or an admin rejected the person; otherwise it joins
// signup_queue, at the front with an invite, and admission runs"). One
// already in the queue keeps its place (an invite it brings now puts it
// at the front); one admitted before is signed in. The admission it runs
// goes on past ctx's cancel, so a browser that left still gets its seat.
func (s *Signup) Arrive(ctx context.Context, a Arrival) (Outcome, error) {
	if a.IdP == "" || a.Subject == "" {
		return Outcome{}, errors.New("signup: an arrival names its idp and subject")
	}
	var out Outcome
	var err error
	// A second try only after a sign-in of the same person joined at once.
	for try := 0; try < 2; try++ {
		if err = s.arrive(ctx, a, &out); !errors.Is(err, errRace) {
			break
		}
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("signup arrival of %s %s: %w", a.IdP, a.Subject, err)
	}
	if out.QueueID == "" {
		return out, nil
	}
	s.admitLogged(ctx, "a signup")
	ctx = context.WithoutCancel(ctx)
	if out, err = s.outcomeOf(ctx, out.QueueID); err != nil || out.QueueID == "" {
		return out, err
	}
	out.QueueSecret, err = s.mintQueueSecret(ctx, out.QueueID)
	return out, err
}

// errRace: another sign-in of the same identity joined the queue first.
var errRace = errors.New("joined at once by another sign-in")

func (s *Signup) arrive(ctx context.Context, a Arrival, out *Outcome) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		*out = Outcome{}
		var id, status string
		var front bool
		err := tx.QueryRow(ctx, "SELECT id, status, front FROM signup_queue WHERE idp = $1 AND subject = $2 FOR UPDATE", a.IdP, a.Subject).
			Scan(&id, &status, &front)
		switch {
		case err == nil:
			return s.returning(ctx, tx, a, id, status, front, out)
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read the queue: %w", err)
		}
		set, err := readSettings(ctx, tx, false)
		if err != nil {
			return err
		}
		switch {
		case !set.Enabled:
			out.Refusal = RefuseClosed
			return nil
		case !a.EmailVerified:
			out.Refusal = RefuseUnverified
			return nil
		case !set.allows(a.Email):
			out.Refusal = RefuseNotAllowed
			return nil
		}
		var invite *string
		if a.Invite != "" {
			// A savepoint: a failed use leaves the transaction usable.
			id, err := useInviteSafely(ctx, tx, a.Invite)
			if err != nil {
				return err
			}
			if id != "" {
				invite = &id
			}
		}
		if set.InviteOnly && invite == nil {
			out.Refusal = RefuseInviteMissing
			return nil
		}
		// Two sign-ins of one person at once: the second waits on the
		// unique (idp, subject), rolls back (its invite's use too) and
		// finds the first's entry on its retry.
		err = tx.QueryRow(ctx, `INSERT INTO signup_queue (idp, subject, login, email, email_verified, invite, front)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (idp, subject) DO NOTHING RETURNING id`,
			a.IdP, a.Subject, a.Login, a.Email, a.EmailVerified, invite, invite != nil).Scan(&out.QueueID)
		if errors.Is(err, pgx.ErrNoRows) {
			return errRace
		}
		if err != nil {
			return fmt.Errorf("join the queue: %w", err)
		}
		s.log.InfoContext(ctx, "signup: joined the queue", "queue_id", out.QueueID, "login", a.Login, "invite", invite != nil)
		return nil
	})
}

// returning handles an arrival already in the queue.
func (s *Signup) returning(ctx context.Context, tx pgx.Tx, a Arrival, id, status string, front bool, out *Outcome) error {
	switch status {
	case "rejected":
		out.Refusal = RefuseDeclined
		return nil
	case "admitted":
		// Its user_id is set (a user's delete removes the entry).
		return tx.QueryRow(ctx, "SELECT user_id FROM signup_queue WHERE id = $1", id).Scan(&out.UserID)
	}
	out.QueueID = id
	if a.Invite != "" && !front {
		inv, err := useInviteSafely(ctx, tx, a.Invite)
		if err != nil {
			return err
		}
		if inv != "" {
			_, err := tx.Exec(ctx, "UPDATE signup_queue SET front = true, invite = $2 WHERE id = $1", id, inv)
			return err
		}
	}
	return nil
}

// useInviteSafely is useInvite in a savepoint: "" for no usable invite.
func useInviteSafely(ctx context.Context, tx pgx.Tx, code string) (string, error) {
	var id string
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		var err error
		id, err = useInvite(ctx, sp, code)
		return err
	})
	if errors.Is(err, ErrNoInvite) {
		return "", nil
	}
	return id, err
}

// outcomeOf answers a queue entry's outcome after admission ran.
func (s *Signup) outcomeOf(ctx context.Context, queueID string) (Outcome, error) {
	var status string
	var userID *string
	err := s.pool.QueryRow(ctx, "SELECT status, user_id FROM signup_queue WHERE id = $1", queueID).Scan(&status, &userID)
	if err != nil {
		return Outcome{}, fmt.Errorf("signup: read the queue entry %s: %w", queueID, err)
	}
	switch {
	case status == "admitted" && userID != nil:
		return Outcome{UserID: *userID}, nil
	case status == "rejected":
		return Outcome{Refusal: RefuseDeclined}, nil
	}
	return Outcome{QueueID: queueID}, nil
}
