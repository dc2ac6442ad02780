package signup

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// callbackHandler is GET /cocoonbox.auth/callback, GitHub's redirect back
// with code and state (or error=access_denied and state). It takes the
// flow only with this browser's cb_login nonce and the flow's state, so a
// forged answer (another state, no cookie, another browser's cookie)
// changes nothing and leaves the flow to the real one. Every failure and
// refusal goes to /cb/?login_error=CODE.
func (g *GitHub) callbackHandler(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	addr := ratelimit.ClientKey(r, g.trusted)
	if _, wait, err := g.callbacks.Take(ctx, addr); err != nil {
		g.refuse(w, r, ErrFailed, "the callback's limit", err)
		return
	} else if wait > 0 {
		g.refuse(w, r, ErrTooMany, "callback throttled", nil, "address", addr, "retry_after", wait)
		return
	}
	if !g.on {
		g.refuse(w, r, ErrFailed, "GitHub sign-in is not configured", nil)
		return
	}
	q := r.URL.Query()
	ck, err := r.Cookie(LoginCookie)
	if err != nil || ck.Value == "" {
		g.refuse(w, r, ErrBrowser, "no cb_login cookie", nil)
		return
	}
	f, err := g.takeFlow(ctx, q.Get("state"), ck.Value)
	switch {
	case errors.Is(err, errFlowBrowser):
		g.refuse(w, r, ErrBrowser, "no flow of this browser has this state", nil)
		return
	case errors.Is(err, errFlowSpent):
		http.SetCookie(w, g.loginCookie("", -1))
		g.refuse(w, r, ErrFailed, "the flow was used or expired", nil)
		return
	case err != nil:
		g.refuse(w, r, ErrFailed, "take the flow", err)
		return
	}
	// The flow is this browser's: its cookie has done its work.
	http.SetCookie(w, g.loginCookie("", -1))
	if e := q.Get("error"); e != "" {
		if e == "access_denied" {
			g.refuse(w, r, ErrGitHubDenied, "the person declined at GitHub", nil)
		} else {
			g.refuse(w, r, ErrFailed, "GitHub answered an error", nil, "github_error", e)
		}
		return
	}
	gu, err := g.readGitHub(ctx, q.Get("code"), f.Verifier)
	if err != nil {
		g.refuse(w, r, ErrFailed, "GitHub", err, "rate_limited", limited(err))
		return
	}
	if f.Purpose == purposeConnect {
		g.finishConnect(w, r, f, gu)
		return
	}
	g.finishSignIn(w, r, f, gu)
}

// readGitHub redeems code, reads the account and its primary email, and
// drops GitHub's token (revoked at GitHub; a failed revoke is logged).
func (g *GitHub) readGitHub(ctx context.Context, code, verifier string) (githubUser, error) {
	if code == "" {
		return githubUser{}, errors.New("the callback carries no code")
	}
	token, err := g.gh.redeem(ctx, code, g.callback, verifier)
	if err != nil {
		return githubUser{}, err
	}
	gu, err := g.gh.user(ctx, token)
	// The token goes whatever the reads did: the api keeps nothing of it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), githubTimeout)
	defer cancel()
	if rerr := g.gh.revoke(rctx, token); rerr != nil {
		g.log.WarnContext(ctx, "GitHub sign-in: the token was not revoked at GitHub (it is forgotten here)", "err", rerr)
	}
	return gu, err
}

// finishSignIn signs in the user of a known identity, or hands an unknown
// one to signup.
func (g *GitHub) finishSignIn(w http.ResponseWriter, r *http.Request, f flow, gu githubUser) {
	ctx := r.Context()
	var userID string
	var disabled bool
	err := g.pool.QueryRow(ctx, `
		UPDATE identities i SET login = $2, email = $3, email_verified = $4
		FROM users u WHERE u.id = i.user_id AND i.idp = 'github' AND i.subject = $1
		RETURNING i.user_id, u.disabled_at IS NOT NULL`, gu.ID, gu.Login, gu.Email, gu.EmailVerified).Scan(&userID, &disabled)
	switch {
	case err == nil:
		if disabled {
			g.refuse(w, r, ErrDisabled, "the identity's user is disabled", nil, "user_id", userID)
			return
		}
		g.signIn(w, r, userID, f.ReturnTo, gu)
		return
	case !errors.Is(err, pgx.ErrNoRows):
		g.refuse(w, r, ErrFailed, "read the identity", err)
		return
	}
	// An identity no user has: signup's (the email never links an account).
	var enabled bool
	if err := g.pool.QueryRow(ctx, "SELECT enabled FROM signup_settings").Scan(&enabled); err != nil {
		g.refuse(w, r, ErrFailed, "read the signup settings", err)
		return
	}
	if enabled && !gu.EmailVerified {
		g.refuse(w, r, ErrEmailUnverified, "the primary email is unverified", nil, "github_id", gu.ID)
		return
	}
	if g.arrive == nil {
		g.refuse(w, r, ErrSignupClosed, "an unknown identity and no signup", nil, "github_id", gu.ID)
		return
	}
	out, err := g.arrive(context.WithoutCancel(ctx), Arrival{IdP: "github", Subject: gu.ID, Login: gu.Login,
		Email: gu.Email, EmailVerified: gu.EmailVerified, Invite: f.Invite})
	switch {
	case err != nil:
		g.refuse(w, r, ErrFailed, "signup", err, "github_id", gu.ID)
	case out.Refusal != "":
		g.refuse(w, r, out.Refusal, "signup refused", nil, "github_id", gu.ID)
	case out.UserID != "":
		g.signIn(w, r, out.UserID, f.ReturnTo, gu)
	case out.QueueID != "":
		g.log.InfoContext(ctx, "GitHub sign-in: queued", "github_id", gu.ID, "queue_id", out.QueueID)
		g.setQueue(w, out.QueueSecret)
		g.goTo(w, r, "/cb/queue")
	default:
		g.refuse(w, r, ErrFailed, "signup answered nothing", nil, "github_id", gu.ID)
	}
}

// signIn starts a console session of userID (an enabled user) and goes to returnTo.
func (g *GitHub) signIn(w http.ResponseWriter, r *http.Request, userID, returnTo string, gu githubUser) {
	ctx := r.Context()
	var u users.User
	var disabled bool
	err := g.pool.QueryRow(ctx, "SELECT id, name, admin, disabled_at IS NOT NULL, created_at FROM users WHERE id = $1", userID).
		Scan(&u.ID, &u.Name, &u.Admin, &disabled, &u.CreatedAt)
	if err != nil {
		g.refuse(w, r, ErrFailed, "read the user", err, "user_id", userID)
		return
	}
	if disabled {
		g.refuse(w, r, ErrDisabled, "the user is disabled", nil, "user_id", userID)
		return
	}
	if err := g.startSession(ctx, w, u); err != nil {
		g.refuse(w, r, ErrFailed, "start the session", err, "user_id", userID)
		return
	}
	g.log.InfoContext(ctx, "GitHub sign-in", "user", u.Name, "user_id", u.ID, "github_id", gu.ID)
	g.goTo(w, r, returnTo)
}

// finishConnect links the GitHub account to the flow's user: github_taken
// when another user has it, github_linked when the user has another
// GitHub account; a waiting queue entry of the account goes.
func (g *GitHub) finishConnect(w http.ResponseWriter, r *http.Request, f flow, gu githubUser) {
	ctx := r.Context()
	code := ""
	err := pgx.BeginFunc(ctx, g.pool, func(tx pgx.Tx) error {
		var disabled bool
		// The user's row lock orders connects of one user.
		if err := tx.QueryRow(ctx, "SELECT disabled_at IS NOT NULL FROM users WHERE id = $1 FOR UPDATE", f.UserID).Scan(&disabled); err != nil {
			return fmt.Errorf("read the user: %w", err)
		}
		if disabled {
			code = ErrDisabled
			return nil
		}
		var owner, subject string
		err := tx.QueryRow(ctx, "SELECT user_id, subject FROM identities WHERE idp = 'github' AND (subject = $1 OR user_id = $2) ORDER BY subject = $1 DESC LIMIT 1",
			gu.ID, f.UserID).Scan(&owner, &subject)
		switch {
		case err == nil && subject == gu.ID && owner == f.UserID:
			return nil // linked already
		case err == nil && subject == gu.ID:
			code = ErrGitHubTaken
			return nil
		case err == nil:
			code = ErrGitHubLinked
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read the identities: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO identities (idp, subject, user_id, login, email, email_verified) VALUES ('github', $1, $2, $3, $4, $5)`,
			gu.ID, f.UserID, gu.Login, gu.Email, gu.EmailVerified); err != nil {
			return fmt.Errorf("link the identity: %w", err)
		}
		_, err = tx.Exec(ctx, "DELETE FROM signup_queue WHERE idp = 'github' AND subject = $1 AND status = 'waiting'", gu.ID)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		// A connect or an admission of the same account at the same moment.
		err, code = nil, ErrGitHubTaken
	}
	if err != nil {
		g.refuse(w, r, ErrFailed, "connect the identity", err, "user_id", f.UserID)
		return
	}
	if code != "" {
		g.refuse(w, r, code, "connect refused", nil, "user_id", f.UserID, "github_id", gu.ID)
		return
	}
	g.log.InfoContext(ctx, "GitHub identity connected", "user_id", f.UserID, "github_id", gu.ID)
	g.goTo(w, r, f.ReturnTo)
}

// refuse sends the browser to /cb/?login_error=code and logs why.
func (g *GitHub) refuse(w http.ResponseWriter, r *http.Request, code, why string, err error, attrs ...any) {
	attrs = append(attrs, "login_error", code, "why", why)
	if err != nil {
		g.log.WarnContext(r.Context(), "GitHub sign-in failed", append(attrs, "err", err)...)
	} else {
		g.log.InfoContext(r.Context(), "GitHub sign-in refused", attrs...)
	}
	http.Redirect(w, r, "/cb/?login_error="+url.QueryEscape(code), http.StatusSeeOther)
}

// goTo sends the browser on to a console path through a page of this
// origin, not a redirect: the console's cookies are SameSite=Strict, and a
// redirect would still be part of the navigation GitHub started (cross-site),
// so the first page would not see them.
func (g *GitHub) goTo(w http.ResponseWriter, r *http.Request, to string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	if err := onwardPage.Execute(w, to); err != nil {
		g.log.ErrorContext(r.Context(), "render the onward page", "err", err)
	}
}

var onwardPage = template.Must(template.New("onward").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={{.}}"><title>Signed in · cocoonbox</title></head>
<body><p>Signed in. <a id="onward" href="{{.}}">Continue</a></p></body></html>
`))
