package signup

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/users"
)

var (
	//go:embed pages/account.html
	accountHTML string
	//go:embed pages/account.js
	accountJS []byte
	//go:embed pages/admin.html
	adminHTML string
	//go:embed pages/admin.js
	adminJS []byte
	//go:embed pages/queue.html
	queueHTML string
	//go:embed pages/queue.js
	queueJS []byte
)

// The pages of signup, which the console serves (console.Section.Page,
// console.Console.AddPage): the user's own account, where a non-admin
// deletes it (POST /cb/api/me/delete); the admin's; and the signup
// queue's, for a queued person without an account (its cookie) as for
// anyone, read by the page from /cb/api/queue/me.
var (
	AccountPage = console.Page{Title: "Your account", Narrow: true, Main: template.HTML(accountHTML),
		Script: console.Asset{Name: "account.js", Body: accountJS}}
	AdminPage = console.Page{Title: "Admin", AdminsOnly: true, Main: template.HTML(adminHTML),
		Script: console.Asset{Name: "admin.js", Body: adminJS}}
	QueuePage = console.Page{Title: "The signup queue", Narrow: true, SignedOut: true, Main: template.HTML(queueHTML),
		Script: console.Asset{Name: "queue.js", Body: queueJS}}
)

// QueueCookie is the queued person's cookie (Contract: "A queued person
// gets the Strict cookie cb_queue (90 days) and the page /cb/queue"): a
// random secret of its own (QueueSecretPrefix and 64 hex digits), of
// which the database keeps the SHA-256 (signup_queue_cookies). It was the
// queue entry's id, which becomes the account's id at admission, so
// anyone who learnt that id read the entry's email (issue 41, Deliver 9).
// Admission spends it: a spent secret answers the entry's status alone.
const QueueCookie = "cb_queue"

// QueueSecretPrefix begins every cb_queue secret.
const QueueSecretPrefix = "cbq_"

// QueueCookieTTL is the cookie's life, and its secret's: an older one is
// refused and pruned.
const QueueCookieTTL = 90 * 24 * time.Hour

// QueueSpentTTL is how long a spent secret keeps answering the admitted
// entry's status ("You're in" on the person's page) before it is pruned;
// by then the person signs in with GitHub as any member does.
const QueueSpentTTL = 30 * 24 * time.Hour

// QueueSecretsPerEntry is how many live secrets one queue entry keeps
// (one a browser that signed in while queued): minting one more drops the
// oldest, so signing in again and again cannot grow the table.
const QueueSecretsPerEntry = 8

var (
	uuidRule        = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	queueSecretRule = regexp.MustCompile(`^` + QueueSecretPrefix + `[0-9a-f]{64}$`)
)

func (s *Signup) queueCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: QueueCookie, Value: value, Path: "/cb/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode}
}

// SetQueueCookie puts the cb_queue cookie of secret (an Outcome's
// QueueSecret) in the answer w; the callback then sends the browser to
// /cb/queue.
func (s *Signup) SetQueueCookie(w http.ResponseWriter, secret string) {
	http.SetCookie(w, s.queueCookie(secret, int(QueueCookieTTL.Seconds())))
}

// mintQueueSecret makes a new cb_queue secret of the queue entry
// queueID and keeps its SHA-256. On the way it prunes: every secret
// expired (QueueCookieTTL) or spent QueueSpentTTL ago, and the entry's
// oldest beyond QueueSecretsPerEntry. Pruning where rows are made bounds
// the table by the entries, as storeFlow does for the GitHub sign-ins.
func (s *Signup) mintQueueSecret(ctx context.Context, queueID string) (string, error) {
	secret, digest := newSecret(QueueSecretPrefix)
	if _, err := s.pool.Exec(ctx, `
		WITH gone AS (DELETE FROM signup_queue_cookies
			WHERE created_at < now() - make_interval(secs => $3) OR spent_at < now() - make_interval(secs => $4)),
		oldest AS (DELETE FROM signup_queue_cookies WHERE sha256 IN (
			SELECT sha256 FROM signup_queue_cookies WHERE queue_id = $2 ORDER BY created_at DESC, sha256 OFFSET $5))
		INSERT INTO signup_queue_cookies (sha256, queue_id) VALUES ($1, $2)`,
		digest[:], queueID, QueueCookieTTL.Seconds(), QueueSpentTTL.Seconds(), QueueSecretsPerEntry-1); err != nil {
		return "", fmt.Errorf("keep the queue cookie: %w", err)
	}
	return secret, nil
}

func (s *Signup) clearQueueCookie(w http.ResponseWriter) { http.SetCookie(w, s.queueCookie("", -1)) }

// queueCookieOf is the queue entry r's cb_queue cookie names, and
// whether admission spent it; ErrNotFound for no cookie, a malformed or
// an unknown one, one past QueueCookieTTL or spent QueueSpentTTL ago.
func (s *Signup) queueCookieOf(r *http.Request) (id string, spent bool, err error) {
	c, err := r.Cookie(QueueCookie)
	if err != nil || !queueSecretRule.MatchString(c.Value) {
		return "", false, ErrNotFound
	}
	err = s.pool.QueryRow(r.Context(), `SELECT queue_id::text, spent_at IS NOT NULL FROM signup_queue_cookies
		WHERE sha256 = $1 AND created_at >= now() - make_interval(secs => $2)
		AND (spent_at IS NULL OR spent_at >= now() - make_interval(secs => $3))`,
		sum(c.Value), QueueCookieTTL.Seconds(), QueueSpentTTL.Seconds()).Scan(&id, &spent)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, ErrNotFound
	}
	if err != nil {
		return "", false, fmt.Errorf("read the queue cookie: %w", err)
	}
	return id, spent, nil
}

// QueueStatus is GET /cb/api/queue/me's answer.
type QueueStatus struct {
	Status   string    `json:"status"`   // waiting, admitted or rejected
	Position int       `json:"position"` // 1 for the next; 0 when not waiting
	Waiting  int       `json:"waiting"`  // everyone waiting
	Email    string    `json:"email"`
	Since    time.Time `json:"since"`
}

// Status answers the queue entry id's status.
func (s *Signup) Status(ctx context.Context, id string) (QueueStatus, error) {
	e, err := s.entry(ctx, id)
	if err != nil {
		return QueueStatus{}, err
	}
	st := QueueStatus{Status: e.Status, Position: e.Position, Email: e.Email, Since: e.Since}
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM signup_queue WHERE status = 'waiting'").Scan(&st.Waiting); err != nil {
		return QueueStatus{}, fmt.Errorf("count the queue: %w", err)
	}
	return st, nil
}

func (s *Signup) notQueued(w http.ResponseWriter) {
	s.clearQueueCookie(w)
	server.WriteJSON(w, http.StatusNotFound, callError{"not_queued", "this browser is not in the signup queue; sign in with GitHub to join"})
}

// queueMe is GET /cb/api/queue/me. An admitted person's entry (the
// cookie spent) answers {"status": "admitted"} alone: the entry is the
// account's record now, and the page only says to sign in.
func (s *Signup) queueMe(w http.ResponseWriter, r *http.Request) {
	id, spent, err := s.queueCookieOf(r)
	var st QueueStatus
	if err == nil && !spent {
		st, err = s.Status(r.Context(), id)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		s.notQueued(w)
	case err != nil:
		s.fail(w, r, "read the queue", err)
	case spent || st.Status == "admitted":
		server.WriteJSON(w, http.StatusOK, map[string]string{"status": "admitted"})
	default:
		server.WriteJSON(w, http.StatusOK, st)
	}
}

// Leave deletes a waiting queue entry: ErrNotFound, ErrAdmitted, and
// ErrRejected for a rejected one, which stays (deleted, the person's next
// sign-in would be a new arrival: the admin's reject undone).
// Admission runs after (Contract: "a person leaving").
func (s *Signup) Leave(ctx context.Context, id string) error {
	var status string
	err := s.pool.QueryRow(ctx, `WITH gone AS (DELETE FROM signup_queue WHERE id::text = $1 AND status = 'waiting' RETURNING status)
		SELECT coalesce((SELECT status FROM gone), (SELECT status FROM signup_queue WHERE id::text = $1), '')`, id).Scan(&status)
	if err != nil {
		return fmt.Errorf("leave the queue: %w", err)
	}
	switch status {
	case "":
		return fmt.Errorf("%w: queue entry %s", ErrNotFound, id)
	case "admitted":
		return fmt.Errorf("%w: sign in with GitHub", ErrAdmitted)
	case "rejected":
		return fmt.Errorf("%w: the entry stays", ErrRejected)
	}
	s.log.InfoContext(ctx, "signup: left the queue", "queue_id", id)
	s.admitLogged(ctx, "a person left")
	return nil
}

// leaveQueue is DELETE /cb/api/queue/me.
func (s *Signup) leaveQueue(w http.ResponseWriter, r *http.Request) {
	id, _, err := s.queueCookieOf(r)
	if err == nil {
		err = s.Leave(r.Context(), id)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		s.notQueued(w)
		return
	// The person's page shows these as they are (issue 41, Deliver 2):
	// signup's general ones read "rejected by an admin: the entry stays".
	case errors.Is(err, ErrRejected):
		server.WriteJSON(w, http.StatusConflict, callError{"declined", "An admin declined your signup, so you have no place in the queue to leave."})
		return
	case errors.Is(err, ErrAdmitted):
		server.WriteJSON(w, http.StatusConflict, callError{"admitted", "You are in already: your account is ready. Sign in with GitHub."})
		return
	case err != nil:
		s.fail(w, r, "leave the queue", err)
		return
	}
	s.clearQueueCookie(w)
	w.WriteHeader(http.StatusNoContent)
}

// selfDelete is POST /cb/api/me/delete {name} (Contract: "with the
// caller's own user name runs the admin delete ..., ends the session and
// admits the next person; an admin's account is refused (403)").
func (s *Signup) selfDelete(w http.ResponseWriter, r *http.Request) {
	u, ok := s.session(r)
	if !ok {
		server.WriteJSON(w, http.StatusUnauthorized, callError{"signed_out", "You are signed out. Sign in again."})
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if !readCall(w, r, &req) {
		return
	}
	if u.Admin {
		server.WriteJSON(w, http.StatusForbidden, callError{"admin", "An admin's account cannot be deleted here. Ask another admin to delete it."})
		return
	}
	if req.Name != u.Name {
		server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", "To delete your account, type your own user name."})
		return
	}
	// The delete goes on when the browser leaves: half of it is no state.
	ctx := context.WithoutCancel(r.Context())
	if err := s.deleteUser(ctx, u.Name); err != nil && !errors.Is(err, users.ErrNotFound) {
		s.fail(w, r, "delete the account", err)
		return
	}
	s.log.InfoContext(ctx, "account deleted by its user", "user", u.ID, "name", u.Name)
	s.clearSession(w)
	s.clearQueueCookie(w)
	s.admitLogged(ctx, "a user deleted")
	w.WriteHeader(http.StatusNoContent)
}
