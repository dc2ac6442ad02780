package signup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// callError is a signup call's error answer (the console's shape).
type callError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Mount puts signup's pages and calls on mux (Contract: Sign-in with GitHub
// and signup). Admins only (401 signed_out, 403 not_admin):
//
//	GET    /cb/api/signup                     200 the settings
//	PUT    /cb/api/signup                     {key: value, ...}: 200 the settings; 400 naming an unknown key or a range
//	GET    /cb/api/queue                      200 {entries, seats, seats_used, admitted_last_hour, hourly_accounts, enabled}
//	POST   /cb/api/queue/{id}/admit           {}: 200 the entry, the account made past the cap
//	POST   /cb/api/queue/{id}/front           {}: 200 the entry, moved to the front
//	POST   /cb/api/queue/{id}/reject          {}: 200 the entry, refused from now on (declined)
//	POST   /cb/api/invites                    {uses 1..1000, days 1..90}: 201 {id, ..., code, link}, the code once
//	GET    /cb/api/invites                    200 {invites}
//	DELETE /cb/api/invites/{id}               204
//	POST   /cb/api/invite-tokens              {label}: 201 {id, ..., token}, the token once
//	GET    /cb/api/invite-tokens              200 {tokens}
//	DELETE /cb/api/invite-tokens/{id}         204
//	GET    /cb/api/users                      200 {users} with idp and max_agent_boxes
//	PATCH  /cb/api/users/{id}                 {max_agent_boxes 0..64, 0 no cap}: 200 the user
//
// With an invite-scoped token (GuardInviteTokens): POST /cb/api/invites
// {days 1..7, default 2; uses 1 or absent} and GET /cb/api/invites (its own).
//
// The queue's person (the cb_queue cookie) and a signed-in user:
//
//	GET    /cb/api/queue/me                   200 {status, position, waiting, email, since}; 404 not_queued
//	DELETE /cb/api/queue/me                   204, the entry deleted and the cookie cleared; 409 when admitted
//	POST   /cb/api/me/delete                  {name}: 204, the account deleted and the session ended; 403 for an admin
//
// Their pages, AccountPage, AdminPage and QueuePage, the console serves.
func (s *Signup) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/signup", s.admin(s.getSettings))
	mux.Handle("PUT /cb/api/signup", s.admin(s.putSettings))
	mux.Handle("GET /cb/api/queue", s.admin(s.listQueue))
	mux.Handle("POST /cb/api/queue/{id}/{action}", s.admin(s.actOnEntry))
	mux.Handle("POST /cb/api/invites", http.HandlerFunc(s.createInvite))
	mux.Handle("GET /cb/api/invites", http.HandlerFunc(s.listInvites))
	mux.Handle("DELETE /cb/api/invites/{id}", s.admin(s.revokeInvite))
	mux.Handle("POST /cb/api/invite-tokens", s.admin(s.mintToken))
	mux.Handle("GET /cb/api/invite-tokens", s.admin(s.listTokens))
	mux.Handle("DELETE /cb/api/invite-tokens/{id}", s.admin(s.revokeToken))
	mux.Handle("GET /cb/api/users", s.admin(s.listUsers))
	mux.Handle("PATCH /cb/api/users/{id}", s.admin(s.patchUser))
	mux.Handle("GET /cb/api/queue/me", http.HandlerFunc(s.queueMe))
	mux.Handle("DELETE /cb/api/queue/me", http.HandlerFunc(s.leaveQueue))
	mux.Handle("POST /cb/api/me/delete", http.HandlerFunc(s.selfDelete))
}

// admin runs h for a console session of an enabled admin.
func (s *Signup) admin(h func(http.ResponseWriter, *http.Request, users.User)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := s.adminOf(w, r)
		if ok {
			h(w, r, u)
		}
	})
}

func (s *Signup) adminOf(w http.ResponseWriter, r *http.Request) (users.User, bool) {
	u, ok := s.session(r)
	if !ok {
		server.WriteJSON(w, http.StatusUnauthorized, callError{"signed_out", "You are signed out. Sign in again."})
		return u, false
	}
	if !u.Admin {
		server.WriteJSON(w, http.StatusForbidden, callError{"not_admin", "Only an admin may do this."})
		return u, false
	}
	return u, true
}

// fail answers err at this one edge: ErrInvalid 400, ErrNotFound 404,
// ErrAdmitted and ErrRejected 409, anything else 500 (logged, told in general).
func (s *Signup) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, ErrInvalid):
		server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", err.Error()})
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, callError{"not_found", err.Error()})
	case errors.Is(err, ErrAdmitted):
		server.WriteJSON(w, http.StatusConflict, callError{"admitted", err.Error()})
	case errors.Is(err, ErrRejected):
		server.WriteJSON(w, http.StatusConflict, callError{"declined", err.Error()})
	default:
		s.log.ErrorContext(r.Context(), what+" failed", "err", err)
		server.WriteJSON(w, http.StatusInternalServerError, callError{"internal", what + " failed; try again"})
	}
}

// readCall reads a call's JSON object body (JSON only: the console's CSRF
// defence), answering 415 or 400 when it fails.
func readCall(w http.ResponseWriter, r *http.Request, v any) bool {
	err := server.ReadJSON(r, 64<<10, v)
	switch {
	case errors.Is(err, server.ErrNotJSON):
		server.WriteJSON(w, http.StatusUnsupportedMediaType, callError{"bad_request", err.Error()})
	case err != nil:
		server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", err.Error()})
	}
	return err == nil
}

func (s *Signup) getSettings(w http.ResponseWriter, r *http.Request, _ users.User) {
	set, err := s.Settings(r.Context())
	if err != nil {
		s.fail(w, r, "read the signup settings", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, set)
}

func (s *Signup) putSettings(w http.ResponseWriter, r *http.Request, u users.User) {
	// The body is read whole so every unknown key is named (ReadJSON
	// would stop at the first).
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		server.WriteJSON(w, http.StatusUnsupportedMediaType, callError{"bad_request", server.ErrNotJSON.Error()})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 256<<10))
	if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", "the body could not be read"})
		return
	}
	set, err := s.PutSettings(r.Context(), body)
	if err != nil {
		s.fail(w, r, "set the signup settings", err)
		return
	}
	s.log.InfoContext(r.Context(), "signup settings changed", "admin", u.ID, "enabled", set.Enabled, "seats", set.Seats)
	server.WriteJSON(w, http.StatusOK, set)
}

// QueueEntry is a queue entry as admins see it.
type QueueEntry struct {
	ID            string    `json:"id"`
	Login         string    `json:"login"`
	Email         string    `json:"email"`
	EmailVerified bool      `json:"email_verified"`
	Status        string    `json:"status"`
	Front         bool      `json:"front"`
	Invite        string    `json:"invite_id,omitempty"`
	UserID        string    `json:"user_id,omitempty"`
	Since         time.Time `json:"since"`
	// Position is 1 for the next to be admitted; 0 when not waiting.
	Position int `json:"position"`
}

const entryColumns = `q.id, q.login, q.email, q.email_verified, q.status, q.front, coalesce(q.invite::text, ''), coalesce(q.user_id::text, ''), q.created_at,
	CASE WHEN q.status = 'waiting' THEN (SELECT count(*) FROM signup_queue o WHERE o.status = 'waiting'
		AND ((o.front AND NOT q.front) OR (o.front = q.front AND (o.created_at, o.id) <= (q.created_at, q.id)))) ELSE 0 END`

func scanEntry(r pgx.Row) (QueueEntry, error) {
	var e QueueEntry
	err := r.Scan(&e.ID, &e.Login, &e.Email, &e.EmailVerified, &e.Status, &e.Front, &e.Invite, &e.UserID, &e.Since, &e.Position)
	return e, err
}

func (s *Signup) entry(ctx context.Context, id string) (QueueEntry, error) {
	e, err := scanEntry(s.pool.QueryRow(ctx, "SELECT "+entryColumns+" FROM signup_queue q WHERE q.id::text = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("%w: queue entry %q", ErrNotFound, id)
	}
	return e, err
}

type queueList struct {
	Entries          []QueueEntry `json:"entries"`
	Enabled          bool         `json:"enabled"`
	Seats            int          `json:"seats"`
	SeatsUsed        int          `json:"seats_used"`
	AdmittedLastHour int          `json:"admitted_last_hour"`
	HourlyAccounts   int          `json:"hourly_accounts"`
}

func (s *Signup) listQueue(w http.ResponseWriter, r *http.Request, _ users.User) {
	ctx := r.Context()
	var l queueList
	set, err := s.Settings(ctx)
	if err == nil {
		l.Enabled, l.Seats, l.HourlyAccounts = set.Enabled, set.Seats, set.HourlyAccounts
		err = s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM users WHERE NOT admin AND disabled_at IS NULL),
			(SELECT count(*) FROM signup_admissions WHERE admitted_at > now() - interval '1 hour')`).Scan(&l.SeatsUsed, &l.AdmittedLastHour)
	}
	if err == nil {
		var rows pgx.Rows
		rows, err = s.pool.Query(ctx, "SELECT "+entryColumns+` FROM signup_queue q
			ORDER BY q.status = 'waiting' DESC, q.front DESC, q.created_at, q.id`)
		if err == nil {
			l.Entries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueEntry, error) { return scanEntry(r) })
		}
	}
	if err != nil {
		s.fail(w, r, "list the queue", err)
		return
	}
	if l.Entries == nil {
		l.Entries = []QueueEntry{}
	}
	server.WriteJSON(w, http.StatusOK, l)
}

// actOnEntry is POST /cb/api/queue/{id}/admit|front|reject.
func (s *Signup) actOnEntry(w http.ResponseWriter, r *http.Request, u users.User) {
	var none struct{}
	if !readCall(w, r, &none) {
		return
	}
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx := r.Context()
	if !uuidRule.MatchString(id) {
		// Not an entry's id (a NUL or bad UTF-8 in it was a 500).
		s.fail(w, r, "the queue's "+action, fmt.Errorf("%w: queue entry %q", ErrNotFound, id))
		return
	}
	var err error
	switch action {
	case "admit":
		err = s.AdmitNow(ctx, id)
	case "front":
		err = s.setEntry(ctx, id, "UPDATE signup_queue SET front = true WHERE id::text = $1 AND status = 'waiting'")
	case "reject":
		err = s.setEntry(ctx, id, "UPDATE signup_queue SET status = 'rejected', front = false WHERE id::text = $1 AND status <> 'admitted'")
	default:
		server.WriteJSON(w, http.StatusNotFound, callError{"not_found", fmt.Sprintf("no action %q: admit, front or reject", action)})
		return
	}
	if err != nil {
		s.fail(w, r, "the queue's "+action, err)
		return
	}
	s.log.InfoContext(ctx, "signup: queue entry "+action, "queue_id", id, "admin", u.ID)
	e, err := s.entry(ctx, id)
	if err != nil {
		s.fail(w, r, "read the queue entry", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, e)
}

// setEntry runs an update of one entry: ErrNotFound for no entry,
// ErrAdmitted for one the update does not apply to.
func (s *Signup) setEntry(ctx context.Context, id, sql string) error {
	tag, err := s.pool.Exec(ctx, sql, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	e, err := s.entry(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: the entry is %s", ErrAdmitted, e.Status)
}

type inviteRequest struct {
	Uses *int `json:"uses"`
	Days *int `json:"days"`
}

// createInvite is POST /cb/api/invites, of an admin's session or an
// invite-scoped token (one use, days 1 to 7, default 2).
func (s *Signup) createInvite(w http.ResponseWriter, r *http.Request) {
	tok, byToken := tokenFrom(r)
	var adminID string
	if !byToken {
		u, ok := s.adminOf(w, r)
		if !ok {
			return
		}
		adminID = u.ID
	}
	var req inviteRequest
	if !readCall(w, r, &req) {
		return
	}
	uses, days := 1, 7
	if byToken {
		adminID, days = tok.AdminID, DefaultTokenInvDays
		if req.Uses != nil && *req.Uses != 1 {
			server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", fmt.Sprintf("uses: an invite-scoped token's invite has one use, not %d", *req.Uses)})
			return
		}
		if req.Days != nil && (*req.Days < 1 || *req.Days > MaxTokenInviteDays) {
			server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", fmt.Sprintf("days: an invite-scoped token's invite lasts 1 to %d days, not %d", MaxTokenInviteDays, *req.Days)})
			return
		}
	}
	if req.Uses != nil {
		uses = *req.Uses
	}
	if req.Days != nil {
		days = *req.Days
	}
	inv, err := s.CreateInvite(r.Context(), adminID, tok.ID, uses, days)
	if err != nil {
		s.fail(w, r, "make the invite", err)
		return
	}
	server.WriteJSON(w, http.StatusCreated, inv)
}

// listInvites is GET /cb/api/invites: every invite for an admin's
// session, a token's own for an invite-scoped token.
func (s *Signup) listInvites(w http.ResponseWriter, r *http.Request) {
	tok, byToken := tokenFrom(r)
	if !byToken {
		if _, ok := s.adminOf(w, r); !ok {
			return
		}
	}
	list, err := s.Invites(r.Context(), tok.ID)
	if err != nil {
		s.fail(w, r, "list the invites", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"invites": list})
}

func (s *Signup) revokeInvite(w http.ResponseWriter, r *http.Request, u users.User) {
	if err := s.RevokeInvite(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, "revoke the invite", err)
		return
	}
	s.log.InfoContext(r.Context(), "signup: invite revoked", "invite", r.PathValue("id"), "admin", u.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Signup) mintToken(w http.ResponseWriter, r *http.Request, u users.User) {
	var req struct {
		Label string `json:"label"`
	}
	if !readCall(w, r, &req) {
		return
	}
	t, err := s.MintInviteToken(r.Context(), u.ID, req.Label)
	if err != nil {
		s.fail(w, r, "mint the invite-scoped token", err)
		return
	}
	server.WriteJSON(w, http.StatusCreated, t)
}

func (s *Signup) listTokens(w http.ResponseWriter, r *http.Request, _ users.User) {
	list, err := s.InviteTokens(r.Context())
	if err != nil {
		s.fail(w, r, "list the invite-scoped tokens", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"tokens": list})
}

func (s *Signup) revokeToken(w http.ResponseWriter, r *http.Request, _ users.User) {
	if err := s.RevokeInviteToken(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, "revoke the invite-scoped token", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// AdminUser is a user as the admin page lists it.
type AdminUser struct {
	users.User
	IdP           string `json:"idp"` // "" for an admin-made account
	MaxAgentBoxes int    `json:"max_agent_boxes"`
	// DailyCapMicros is the user's own gw daily cap; null: the default
	// (api.yaml gw.default_daily_cap_micros).
	DailyCapMicros *int64 `json:"daily_cap_micros"`
}

const adminUserColumns = "id, name, admin, disabled_at IS NOT NULL, created_at, coalesce(idp, ''), coalesce(max_agent_boxes, 0), daily_cap_micros"

func scanAdminUser(r pgx.Row) (AdminUser, error) {
	var u AdminUser
	err := r.Scan(&u.ID, &u.Name, &u.Admin, &u.Disabled, &u.CreatedAt, &u.IdP, &u.MaxAgentBoxes, &u.DailyCapMicros)
	return u, err
}

func (s *Signup) listUsers(w http.ResponseWriter, r *http.Request, _ users.User) {
	rows, err := s.pool.Query(r.Context(), "SELECT "+adminUserColumns+" FROM users ORDER BY name")
	var list []AdminUser
	if err == nil {
		list, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AdminUser, error) { return scanAdminUser(r) })
	}
	if err != nil {
		s.fail(w, r, "list the users", err)
		return
	}
	if list == nil {
		list = []AdminUser{}
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"users": list})
}

// patchUser is PATCH /cb/api/users/{id} {max_agent_boxes, daily_cap_micros},
// either or both: max_agent_boxes 0 for no cap (NULL), else 1 to
// MaxAgentBoxes; daily_cap_micros 0 to MaxDailyCapMicros, or null for the
// default. A cap change reaches gw in the same transaction (Deps.PushCap),
// so the user's next model call is judged by it, and a refused push
// leaves the cap as it was.
func (s *Signup) patchUser(w http.ResponseWriter, r *http.Request, admin users.User) {
	var req struct {
		MaxAgentBoxes  *int            `json:"max_agent_boxes"`
		DailyCapMicros json.RawMessage `json:"daily_cap_micros"`
	}
	if !readCall(w, r, &req) {
		return
	}
	if req.MaxAgentBoxes == nil && req.DailyCapMicros == nil {
		server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", "give max_agent_boxes (0 for no cap) or daily_cap_micros (null for the default)"})
		return
	}
	var agentBoxes *int
	if req.MaxAgentBoxes != nil {
		n := *req.MaxAgentBoxes
		if n < 0 || n > MaxAgentBoxes {
			server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", fmt.Sprintf("max_agent_boxes is 0 (no cap) to %d, not %d", MaxAgentBoxes, n)})
			return
		}
		agentBoxes = &n
	}
	var dailyCap *int64
	if req.DailyCapMicros != nil && string(req.DailyCapMicros) != "null" {
		var c int64
		if err := json.Unmarshal(req.DailyCapMicros, &c); err != nil || c < 0 || c > MaxDailyCapMicros {
			server.WriteJSON(w, http.StatusBadRequest, callError{"bad_request", fmt.Sprintf("daily_cap_micros is null (the default) or a whole number 0 to %d, not %s", int64(MaxDailyCapMicros), req.DailyCapMicros)})
			return
		}
		dailyCap = &c
	}
	id := r.PathValue("id")
	if !uuidRule.MatchString(id) {
		// Not a user's id (a NUL or bad UTF-8 in it was a 500).
		s.fail(w, r, "change the user", fmt.Errorf("%w: user %q", ErrNotFound, id))
		return
	}
	var u AdminUser
	err := pgx.BeginFunc(r.Context(), s.pool, func(tx pgx.Tx) error {
		var err error
		if agentBoxes != nil {
			var v *int
			if *agentBoxes > 0 {
				v = agentBoxes
			}
			if _, err = tx.Exec(r.Context(), "UPDATE users SET max_agent_boxes = $2 WHERE id::text = $1", id, v); err != nil {
				return err
			}
		}
		if req.DailyCapMicros != nil {
			if _, err = tx.Exec(r.Context(), "UPDATE users SET daily_cap_micros = $2 WHERE id::text = $1", id, dailyCap); err != nil {
				return err
			}
		}
		if u, err = scanAdminUser(tx.QueryRow(r.Context(), "SELECT "+adminUserColumns+" FROM users WHERE id::text = $1", id)); err != nil {
			return err
		}
		if req.DailyCapMicros != nil && s.pushCap != nil {
			return s.pushCap(r.Context(), tx, u.ID)
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("%w: user %q", ErrNotFound, id)
	}
	if err != nil {
		s.fail(w, r, "change the user", err)
		return
	}
	s.log.InfoContext(r.Context(), "user limits set", "user", u.ID, "max_agent_boxes", u.MaxAgentBoxes, "daily_cap_micros", u.DailyCapMicros, "admin", admin.ID)
	server.WriteJSON(w, http.StatusOK, u)
}
