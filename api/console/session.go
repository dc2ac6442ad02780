package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// CookieName is the console session's cookie.
const CookieName = "cb_session"

// SessionTTL is how long a console session lasts from its sign-in.
const SessionTTL = 30 * 24 * time.Hour

// StartSession stores a new session of u and sets its cookie on w:
// HttpOnly, SameSite=Strict, Path=/cb/, Secure when the api is served over
// https. The password sign-in and the GitHub sign-in's callback (package
// signup) call it.
func (c *Console) StartSession(ctx context.Context, w http.ResponseWriter, u users.User) error {
	var raw [32]byte
	rand.Read(raw[:])
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(value))
	// The user's expired sessions go at each sign-in, so the table holds
	// live sessions and the last few of each user.
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM console_sessions WHERE user_id = $1 AND expires_at <= now()", u.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO console_sessions (sha256, user_id, expires_at) VALUES ($1, $2, now() + $3::interval)",
			sum[:], u.ID, fmt.Sprintf("%d seconds", int(SessionTTL.Seconds())))
		return err
	})
	if err != nil {
		return fmt.Errorf("store the session: %w", err)
	}
	http.SetCookie(w, c.cookie(value, int(SessionTTL.Seconds())))
	return nil
}

func (c *Console) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: value, Path: "/cb/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode}
}

// ClearCookie expires the session cookie in the answer w.
func (c *Console) ClearCookie(w http.ResponseWriter) { http.SetCookie(w, c.cookie("", -1)) }

// Session answers the signed-in user of r's session cookie: a live
// session of an enabled account. A database error is logged and answered
// as no session.
func (c *Console) Session(r *http.Request) (users.User, bool) {
	sum, ok := cookieSum(r)
	if !ok {
		return users.User{}, false
	}
	var u users.User
	err := c.pool.QueryRow(r.Context(), `SELECT u.id, u.name, u.admin, u.created_at FROM console_sessions s JOIN users u ON u.id = s.user_id
		WHERE s.sha256 = $1 AND s.expires_at > now() AND u.disabled_at IS NULL`, sum[:]).Scan(&u.ID, &u.Name, &u.Admin, &u.CreatedAt)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			c.log.WarnContext(r.Context(), "console session lookup failed", "err", err)
		}
		return users.User{}, false
	}
	return u, true
}

func cookieSum(r *http.Request) ([32]byte, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil || len(ck.Value) != 43 {
		return [32]byte{}, false
	}
	return sha256.Sum256([]byte(ck.Value)), true
}

// endSession deletes r's session (the console's sign-out).
func (c *Console) endSession(r *http.Request) error {
	sum, ok := cookieSum(r)
	if !ok {
		return nil
	}
	var userID string
	err := c.pool.QueryRow(r.Context(), "DELETE FROM console_sessions WHERE sha256 = $1 RETURNING user_id", sum[:]).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err == nil {
		c.endLive(userID, &sum)
	}
	return err
}

// EndSessions ends every console session of userID in tx (sign out
// everywhere), and the calls open on them on this api (BindSession) at
// once, before tx commits: a failed sign out leaves the sessions, and a
// viewer whose screen ended opens it again.
func (c *Console) EndSessions(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, "DELETE FROM console_sessions WHERE user_id = $1", userID); err != nil {
		return fmt.Errorf("end the console sessions: %w", err)
	}
	c.endLive(userID, nil)
	return nil
}

// SessionSum is the SHA-256 of r's console session secret (the cb_session
// cookie), as console_sessions keys it; false without one. Connect's flow
// keeps it to check at its callback, where the cookie (Path=/cb/) is not
// sent, that the session that began the flow still lives (Contract:
// Connect, Console flow).
func SessionSum(r *http.Request) ([32]byte, bool) { return cookieSum(r) }

// SessionLive says whether the session whose secret hashes to sum is live
// and of userID, an enabled account. A database error is logged and
// answered as false.
func (c *Console) SessionLive(ctx context.Context, sum [32]byte, userID string) bool {
	var one int
	err := c.pool.QueryRow(ctx, `SELECT 1 FROM console_sessions s JOIN users u ON u.id = s.user_id
		WHERE s.sha256 = $1 AND s.user_id = $2 AND s.expires_at > now() AND u.disabled_at IS NULL`, sum[:], userID).Scan(&one)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.log.WarnContext(ctx, "console session lookup failed", "err", err)
	}
	return err == nil
}
