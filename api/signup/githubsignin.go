package signup

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// CallbackPath is the GitHub sign-in's callback under oauth.public_url
// (the OAuth App's "Authorization callback URL").
const CallbackPath = "/cocoonbox.auth/callback"

// LoginCookie is the GitHub sign-in's nonce cookie: SameSite=Lax (it must
// come along on GitHub's redirect back, a cross-site top-level GET),
// HttpOnly, on Path=/cocoonbox.auth/ only.
const LoginCookie = "cb_login"

// Limits of begin and the callback, each per client address (the contract's
// 20 in 15 min).
const (
	LimitPerAddress = 20
	LimitWindow     = 15 * time.Minute
)

// The login_error codes of the contract: where every failure and refusal
// of a GitHub sign-in goes (/cb/?login_error=CODE), turned into text by
// the sign-in page, never by the link.
const (
	ErrSignupClosed    = RefuseClosed
	ErrEmailUnverified = RefuseUnverified
	ErrEmailNotAllowed = RefuseNotAllowed
	ErrInviteRequired  = RefuseInviteMissing
	ErrDeclined        = RefuseDeclined
	ErrDisabled        = "disabled"
	ErrGitHubTaken     = "github_taken"
	ErrGitHubLinked    = "github_linked"
	ErrBrowser         = "browser"
	ErrTooMany         = "too_many"
	ErrGitHubDenied    = "github_denied"
	ErrFailed          = "failed"
)

// GitHubDeps are what the GitHub sign-in is built from.
type GitHubDeps struct {
	Pool *pgxpool.Pool
	// App is the OAuth App; an empty ClientID leaves GitHub sign-in off
	// (providers says github false, begin answers 404).
	App GitHubApp
	// PublicURL is oauth.public_url: the callback is PublicURL+CallbackPath,
	// on the console's origin (the session cookie is set there).
	PublicURL string
	// Secure marks the cookies Secure (the api is served over https).
	Secure bool
	// Session is the console session's user of r (console.Session).
	Session func(r *http.Request) (users.User, bool)
	// StartSession signs u in to the console on w (console.StartSession).
	StartSession func(ctx context.Context, w http.ResponseWriter, u users.User) error
	// Arrive hands signup an identity no user has (Signup.Arrive); nil
	// answers every such person signup_closed.
	Arrive func(ctx context.Context, a Arrival) (Outcome, error)
	// SetQueueCookie puts a queued person's cb_queue cookie in the answer
	// (Signup.SetQueueCookie); needed with Arrive.
	SetQueueCookie func(w http.ResponseWriter, secret string)
	// TrustedProxies name the client behind a proxy (ratelimit.ClientKey).
	TrustedProxies []netip.Prefix
	Log            *slog.Logger
	// Now is the limits' clock; nil is time.Now.
	Now func() time.Time
}

// GitHub serves the GitHub sign-in, connecting and disconnecting an
// identity, and the providers call. Build it with NewGitHub, then Mount.
type GitHub struct {
	pool         *pgxpool.Pool
	gh           *githubClient
	on           bool
	callback     string
	secure       bool
	session      func(*http.Request) (users.User, bool)
	startSession func(context.Context, http.ResponseWriter, users.User) error
	arrive       func(context.Context, Arrival) (Outcome, error)
	setQueue     func(http.ResponseWriter, string)
	trusted      []netip.Prefix
	log          *slog.Logger
	begins       *ratelimit.Limiter
	callbacks    *ratelimit.Limiter
	// lifetime is FlowLifetime; tests shorten it.
	lifetime time.Duration
}

// NewGitHub is the GitHub sign-in of d.
func NewGitHub(d GitHubDeps) (*GitHub, error) {
	begins, err := ratelimit.New(d.Pool, "signup.github.begin", LimitPerAddress, LimitWindow, d.Now)
	if err != nil {
		return nil, err
	}
	callbacks, err := ratelimit.New(d.Pool, "signup.github.callback", LimitPerAddress, LimitWindow, d.Now)
	if err != nil {
		return nil, err
	}
	if d.Arrive != nil && d.SetQueueCookie == nil {
		return nil, fmt.Errorf("signup: GitHubDeps.Arrive without SetQueueCookie")
	}
	on := d.App.ClientID != ""
	if on && (d.App.Secret == "" || d.PublicURL == "" || d.App.WebURL == "" || d.App.APIURL == "") {
		return nil, fmt.Errorf("signup: GitHub sign-in needs the client secret, oauth.public_url and GitHub's URLs")
	}
	return &GitHub{pool: d.Pool, gh: newGitHubClient(d.App), on: on, callback: d.PublicURL + CallbackPath, secure: d.Secure,
		session: d.Session, startSession: d.StartSession, arrive: d.Arrive, setQueue: d.SetQueueCookie, trusted: d.TrustedProxies, log: d.Log,
		begins: begins, callbacks: callbacks, lifetime: FlowLifetime}, nil
}

// Configured reports whether GitHub sign-in is on (the sign-in page offers it).
func (g *GitHub) Configured() bool { return g.on }

// Mount puts the calls on mux:
//
//	GET    /cb/api/auth/providers        {github, signup, invite_only}
//	POST   /cb/api/auth/github/begin     {return_to, invite}: 200 {url} and the cb_login cookie
//	GET    /cocoonbox.auth/callback      GitHub's redirect back
//	GET    /cb/api/me/identities         the signed-in user's identities
//	POST   /cb/api/me/identities/github  {return_to}: 200 {url}, as begin, to connect one
//	DELETE /cb/api/me/identities/github  204; 404 none; 409 an account made through GitHub
//
// Its page, IdentitiesPage, the console serves at /cb/identities.
func (g *GitHub) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/auth/providers", http.HandlerFunc(g.providers))
	mux.Handle("POST /cb/api/auth/github/begin", http.HandlerFunc(g.begin))
	mux.Handle("GET "+CallbackPath, http.HandlerFunc(g.callbackHandler))
	mux.Handle("GET /cb/api/me/identities", g.user(g.listIdentities))
	mux.Handle("POST /cb/api/me/identities/github", g.user(g.connect))
	mux.Handle("DELETE /cb/api/me/identities/github", g.user(g.disconnect))
}

// apiError is a JSON call's error answer, as the console's.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func (g *GitHub) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	g.log.ErrorContext(r.Context(), what+" failed", "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, apiError{"internal", what + " failed; try again"})
}

func (g *GitHub) user(h func(http.ResponseWriter, *http.Request, users.User)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := g.session(r)
		if !ok {
			server.WriteJSON(w, http.StatusUnauthorized, apiError{"signed_out", "You are signed out. Sign in again."})
			return
		}
		h(w, r, u)
	})
}

// Providers is GET /cb/api/auth/providers: whether GitHub sign-in is
// configured, whether signup is on, and whether it is invite-only.
type Providers struct {
	GitHub     bool `json:"github"`
	Signup     bool `json:"signup"`
	InviteOnly bool `json:"invite_only"`
}

func (g *GitHub) providers(w http.ResponseWriter, r *http.Request) {
	p := Providers{GitHub: g.on}
	if err := g.pool.QueryRow(r.Context(), "SELECT enabled, invite_only FROM signup_settings").Scan(&p.Signup, &p.InviteOnly); err != nil {
		g.fail(w, r, "read the providers", err)
		return
	}
	// Signup is reached through GitHub only.
	p.Signup = p.Signup && g.on
	server.WriteJSON(w, http.StatusOK, p)
}
