// Package console is the api's web console at /cb/: the password sign-in
// (POST /cb/api/session, the cb_session cookie, sessions in the database),
// the personal token page, the frame other packages' sections (the
// Devices page, the sign-in's consent page) link into, and the consent page
// of /cb/oauth/authorize that api/signin and api/oauth fill in (ConsentPage).
//
// Contract: Browser sign-in and device tokens (the console, the personal
// token); the sections whose tables were lost are built as docs/api.md says.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

//go:embed migrations/*.sql
var migrations embed.FS

//go:embed pages/*.html
var pages embed.FS

// Schema is the console's migrations (its sessions); they refer to users, so
// they run after users.Schema. The sign-in's limits need ratelimit.Schema.
var Schema = database.NewSchema("console_schema_migrations", migrations, "migrations")

var templates = template.Must(template.ParseFS(pages, "pages/*.html"))

// Section is a part of the console another package serves (its own page
// under /cb/), listed on the home page.
type Section struct {
	Title string // "Devices"
	Path  string // "/cb/devices"
	Blurb string // one line under the title
	// Notice, when set, is a line the home page shows above the sections
	// for the user, linking to Path ("" for none): the Agents section's
	// grants the user has not seen yet.
	Notice func(ctx context.Context, userID string) string
	// AdminsOnly lists it for admins only (the admin page).
	AdminsOnly bool
	// Page, when set, is the section's page, which the console serves at
	// Path (the section then serves its calls only); nil when the section
	// serves its page itself.
	Page *Page
}

// Deps are what the console is built from.
type Deps struct {
	Pool   *pgxpool.Pool
	Users  *users.Store
	Tokens *tokens.Store
	// Secure marks the cookie Secure: the api is served over https (public_url).
	Secure bool
	Log    *slog.Logger
	// SignIn bounds the password sign-in; New panics on a limit below 1 or
	// a window under 1 s (config.Validate refuses those first). The counts
	// are kept in Pool's rate_limits (ratelimit.Schema), shared by every api
	// on the database.
	SignIn SignInLimits
	// Now is the limits' clock; nil is time.Now.
	Now func() time.Time
}

// SignInLimits bound POST /cb/api/session (api.yaml console.sign_in and
// trusted_proxies): PerUser failed sign-ins of one user name and
// PerAddress sign-ins, right or wrong, of one client address
// (ratelimit.ClientKey over TrustedProxies) at once, each given one more
// every Window divided by it.
type SignInLimits struct {
	PerUser, PerAddress int
	Window              time.Duration
	TrustedProxies      []netip.Prefix
}

// Console serves /cb/. Build it with New, add sections, then Mount.
type Console struct {
	pool     *pgxpool.Pool
	users    *users.Store
	tokens   *tokens.Store
	secure   bool
	log      *slog.Logger
	sections []Section
	// The sign-in's limits: failures per user name, attempts per address.
	perUser, perAddress *ratelimit.Limiter
	trusted             []netip.Prefix
	// github: the sign-in page offers "Sign in with GitHub" (OfferGitHub).
	github bool
	// mux is Mount's, which AddSection mounts a section's page on.
	mux interface{ Handle(string, http.Handler) }
	// assets are the files of /cb/assets/: the layout's and the pages'.
	assets map[string]asset
	// boxes lists the user's boxes on the home page (SetBoxes).
	boxes BoxLister
	// live are the long calls open on sessions (BindSession).
	live live
}

// New is the console of d, with the personal token as its first section.
func New(d Deps) *Console {
	perUser, err := ratelimit.New(d.Pool, "console.sign_in.per_user", d.SignIn.PerUser, d.SignIn.Window, d.Now)
	if err != nil {
		panic(fmt.Sprintf("console: Deps.SignIn.PerUser: %v", err))
	}
	perAddress, err := ratelimit.New(d.Pool, "console.sign_in.per_address", d.SignIn.PerAddress, d.SignIn.Window, d.Now)
	if err != nil {
		panic(fmt.Sprintf("console: Deps.SignIn.PerAddress: %v", err))
	}
	c := &Console{pool: d.Pool, users: d.Users, tokens: d.Tokens, secure: d.Secure, log: d.Log,
		perUser: perUser, perAddress: perAddress, trusted: d.SignIn.TrustedProxies,
		sections: []Section{{Title: "Personal token", Path: "/cb/token", Blurb: "One token of your whole account, for scripts and COCOONBOX_TOKEN."}}}
	c.loadAssets()
	return c
}

// OfferGitHub makes the sign-in page offer "Sign in with GitHub" beside
// the password form (package signup serves it; Contract: Sign-in with
// GitHub and signup).
func (c *Console) OfferGitHub() { c.github = true }

// AddSection lists s on the home page and in the navigation, and serves
// its Page, when it has one, at its Path (Serve); it panics when called
// before Mount.
func (c *Console) AddSection(s Section) {
	c.sections = append(c.sections, s)
	if s.Page != nil {
		c.AddPage(s.Path, *s.Page)
	}
}

// AddPage serves p at path (Serve), outside the navigation (the signup
// queue's page); it panics when called before Mount.
func (c *Console) AddPage(path string, p Page) {
	if c.mux == nil {
		panic("console: a page added before Mount: " + path)
	}
	c.mux.Handle("GET "+path, c.Serve(p))
}

// Mount puts the console's pages and calls on mux:
//
//	GET    /cb/                the sign-in form without a session, else the sections
//	GET    /cb/token           the personal token page (303 to the sign-in without a session)
//	GET    /cb/assets/{name}   the layout's and the pages' scripts, the stylesheet, the favicon
//	GET    /favicon.ico        301 to the favicon
//	POST   /cb/api/session     {"user","password"}: 200 with the user and the cookie; 401
//	                           invalid_credentials, 403 disabled, 429 too_many (Retry-After:
//	                           past a limit, or every password check busy)
//	DELETE /cb/api/session     204, the cookie cleared
//	GET    /cb/api/me          200 the user
//	GET    /cb/api/boxes       200 {available, boxes: [BoxSummary]}, the home page's
//	GET    /cb/api/me/token    200 {exists, created_at, used_at}, never the token
//	POST   /cb/api/me/token    200 {"token"} once; the old one ends at once
//	DELETE /cb/api/me/token    204, also when there is none
//
// The /cb/api/me calls answer 401 signed_out without a session; every
// JSON call takes Content-Type application/json only (415 otherwise).
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	c.mux = mux
	mux.Handle("GET /cb/assets/{name}", http.HandlerFunc(c.serveAsset))
	// A browser asks for /favicon.ico of a page without an icon link (a
	// JSON answer, an image opened alone): the console's icon, not a 404.
	mux.Handle("GET /favicon.ico", http.RedirectHandler("/cb/assets/favicon.svg", http.StatusMovedPermanently))
	mux.Handle("GET /cb/{$}", http.HandlerFunc(c.home))
	mux.Handle("GET /cb", http.RedirectHandler("/cb/", http.StatusMovedPermanently))
	mux.Handle("GET /cb/token", c.page(c.tokenPage))
	mux.Handle("POST /cb/api/session", http.HandlerFunc(c.signIn))
	mux.Handle("DELETE /cb/api/session", http.HandlerFunc(c.signOut))
	mux.Handle("GET /cb/api/me", c.user(c.me))
	mux.Handle("GET /cb/api/boxes", c.user(c.listBoxes))
	mux.Handle("GET /cb/api/me/token", c.user(c.tokenInfo))
	mux.Handle("POST /cb/api/me/token", c.user(c.regenerate))
	mux.Handle("DELETE /cb/api/me/token", c.user(c.revokeToken))
}

// apiError is a console call's error answer.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// fail answers an unexpected error: logged in full, told in general.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.log.ErrorContext(r.Context(), what+" failed", "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, apiError{"internal", what + " failed; try again"})
}

// user runs h for the session's user, or answers 401.
func (c *Console) user(h func(http.ResponseWriter, *http.Request, users.User)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := c.Session(r)
		if !ok {
			server.WriteJSON(w, http.StatusUnauthorized, apiError{"signed_out", "You are signed out. Sign in again."})
			return
		}
		h(w, r, u)
	})
}

// ReadJSON is how every call of the console's pages reads its body (the
// console's own, and package signup's): server.ReadJSON, JSON only, the
// CSRF defence, of at most 8 KiB; it answers 415 or 400 and false when
// that fails.
func ReadJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	err := server.ReadJSON(r, 8<<10, v)
	switch {
	case errors.Is(err, server.ErrNotJSON):
		server.WriteJSON(w, http.StatusUnsupportedMediaType, apiError{"bad_request", err.Error()})
	case err != nil:
		server.WriteJSON(w, http.StatusBadRequest, apiError{"bad_request", err.Error()})
	}
	return err == nil
}

type signInRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// signIn is POST /cb/api/session {"user","password"}: 200 with the user and
// a new session cookie; 401 for a wrong name or password, 403 for a
// disabled account, 429 too_many with Retry-After (seconds) past the
// limits, before the password is checked, or when users.MaxHashing checks
// have run for all of users.HashWait (Retry-After: 1).
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	var req signInRequest
	if !ReadJSON(w, r, &req) {
		return
	}
	if req.User == "" || req.Password == "" {
		server.WriteJSON(w, http.StatusBadRequest, apiError{"bad_request", `give both "user" and "password"`})
		return
	}
	// Every attempt of an address counts, so a flood also costs at most
	// per_address password hashes per window.
	addr := ratelimit.ClientKey(r, c.trusted)
	if _, wait, err := c.perAddress.Take(r.Context(), addr); err != nil {
		c.fail(w, r, "sign-in", err)
		return
	} else if wait > 0 {
		c.tooMany(w, r, wait, "from this address", "address", addr)
		return
	}
	// A name no account can have gets no bucket (an attacker's made-up
	// names would fill the map); Authenticate answers it as any unknown one.
	var ticket ratelimit.Ticket
	if users.CheckName(req.User) == nil {
		var wait time.Duration
		var err error
		if ticket, wait, err = c.perUser.Take(r.Context(), req.User); err != nil {
			c.fail(w, r, "sign-in", err)
			return
		} else if wait > 0 {
			c.tooMany(w, r, wait, "for this user name", "user", req.User)
			return
		}
	}
	u, err := c.users.Authenticate(r.Context(), req.User, req.Password)
	if !errors.Is(err, users.ErrBadCredentials) {
		// Only a wrong password counts against the name.
		if rerr := ticket.Return(r.Context()); rerr != nil {
			c.log.WarnContext(r.Context(), "console sign-in: the name's attempt not given back", "user", req.User, "err", rerr)
		}
	}
	switch {
	case errors.Is(err, users.ErrBadCredentials):
		c.log.InfoContext(r.Context(), "console sign-in refused", "user", req.User)
		server.WriteJSON(w, http.StatusUnauthorized, apiError{"invalid_credentials", "wrong user name or password"})
		return
	case errors.Is(err, users.ErrBusy):
		// Nothing was checked: a second's wait, not the window's.
		c.log.WarnContext(r.Context(), "console sign-in: every password check busy", "user", req.User, "max", users.MaxHashing)
		w.Header().Set("Retry-After", "1")
		server.WriteJSON(w, http.StatusTooManyRequests, apiError{"too_many", "the api is checking too many passwords at once; try again in 1 s"})
		return
	case errors.Is(err, users.ErrDisabled):
		server.WriteJSON(w, http.StatusForbidden, apiError{"disabled", "this account is disabled; ask an admin"})
		return
	case err != nil:
		c.fail(w, r, "sign-in", err)
		return
	}
	if err := c.StartSession(r.Context(), w, u); err != nil {
		c.fail(w, r, "sign-in", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, u)
}

// tooMany answers a sign-in past a limit: 429, and Retry-After in whole
// seconds (RFC 9110 §10.2.3).
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration, which, key, value string) {
	c.log.WarnContext(r.Context(), "console sign-in throttled", key, value, "retry_after", wait)
	secs := int(wait / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	server.WriteJSON(w, http.StatusTooManyRequests, apiError{"too_many", fmt.Sprintf("too many sign-in attempts %s; try again in %d s", which, secs)})
}

// signOut is DELETE /cb/api/session: this session ends, 204.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if err := c.endSession(r); err != nil {
		c.fail(w, r, "sign-out", err)
		return
	}
	c.ClearCookie(w)
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) me(w http.ResponseWriter, r *http.Request, u users.User) {
	server.WriteJSON(w, http.StatusOK, u)
}

func (c *Console) tokenInfo(w http.ResponseWriter, r *http.Request, u users.User) {
	p, err := c.tokens.Personal(r.Context(), u.ID)
	if err != nil {
		c.fail(w, r, "read the personal token", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, p)
}

// regenerate is POST /cb/api/me/token: {"token"} once; the old one ends.
func (c *Console) regenerate(w http.ResponseWriter, r *http.Request, u users.User) {
	// JSON only, an empty body too: a field-less form of another port of
	// this host (the cookie goes along) must not replace the token.
	var none struct{}
	if !ReadJSON(w, r, &none) {
		return
	}
	secret, err := c.tokens.Regenerate(r.Context(), u.ID)
	if err != nil {
		c.fail(w, r, "make the personal token", err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]string{"token": string(secret)})
}

// revokeToken is DELETE /cb/api/me/token: 204, also when there is none.
func (c *Console) revokeToken(w http.ResponseWriter, r *http.Request, u users.User) {
	if err := c.tokens.Revoke(r.Context(), u.ID); err != nil {
		c.fail(w, r, "revoke the personal token", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// homeData is what pages/home.html gets.
type homeData struct {
	User     users.User
	Sections []Section
	Notices  []notice
}

// notice is a Section's notice on the home page.
type notice struct{ Text, Path string }

// renderOwn renders name, one of the console's own pages/*.html, as the
// main of p.
func (c *Console) renderOwn(w http.ResponseWriter, r *http.Request, name string, p Page, u *users.User, tmplData, scriptData any) {
	var buf strings.Builder
	if err := templates.ExecuteTemplate(&buf, name, tmplData); err != nil {
		c.log.ErrorContext(r.Context(), "render "+name, "err", err)
		http.Error(w, "the page failed to render; try again", http.StatusInternalServerError)
		return
	}
	p.Main = template.HTML(buf.String())
	c.Render(w, r, http.StatusOK, p, u, scriptData)
}

// home is /cb/: the sign-in form without a session, else the user's
// boxes, counts and sections.
func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	u, ok := c.Session(r)
	if !ok {
		c.renderOwn(w, r, "signin.html", Page{Title: "Sign in", Narrow: true, Script: Asset{Name: "signin.js"}}, nil,
			struct{ GitHub bool }{c.github}, map[string]any{"return_to": returnTo(r)})
		return
	}
	var notices []notice
	var sections []Section
	for _, s := range c.sections {
		if s.AdminsOnly && !u.Admin {
			continue
		}
		sections = append(sections, s)
		if s.Notice == nil {
			continue
		}
		if text := s.Notice(r.Context(), u.ID); text != "" {
			notices = append(notices, notice{Text: text, Path: s.Path})
		}
	}
	c.renderOwn(w, r, "home.html", Page{Title: "Home", Script: Asset{Name: "home.js"}}, &u,
		homeData{User: u, Sections: sections, Notices: notices}, nil)
}

// tokenPage is /cb/token, under Account in the navigation.
func (c *Console) tokenPage(w http.ResponseWriter, r *http.Request, u users.User) {
	c.renderOwn(w, r, "token.html", Page{Title: "Personal token", Nav: "/cb/account", Script: Asset{Name: "token.js"}}, &u, nil, nil)
}

// page serves a page that needs a session; without one it sends the
// browser to the sign-in and back.
func (c *Console) page(h func(http.ResponseWriter, *http.Request, users.User)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := c.Session(r)
		if !ok {
			http.Redirect(w, r, "/cb/?return_to="+r.URL.Path, http.StatusSeeOther)
			return
		}
		h(w, r, u)
	})
}

// returnTo is where the sign-in form goes after signing in: a console path
// only (CheckReturnTo), so a link cannot send a signed-in user elsewhere.
func returnTo(r *http.Request) string {
	p := r.URL.Query().Get("return_to")
	if CheckReturnTo(p) != nil {
		return "/cb/"
	}
	return p
}

// MaxReturnTo bounds return_to (a consent page's URL with its query fits).
const MaxReturnTo = 4096

// CheckReturnTo names what makes p no place to go after a sign-in: it must
// be a path of the console (/cb/...), with an optional query, and nothing
// that leaves it: no scheme or host ("https://evil", "//evil"), no
// backslash or control character, no "." or ".." segment, literal or
// percent-encoded ("/cb/../x", "/cb/%2e%2e/x"), no empty segment.
func CheckReturnTo(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("return_to %q: %s; give a console path such as /cb/", p, why)
	}
	if len(p) > MaxReturnTo {
		return bad("longer than " + strconv.Itoa(MaxReturnTo) + " bytes")
	}
	if strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\") {
		return bad("not a path of this host")
	}
	for _, c := range []byte(p) {
		if c < 0x20 || c == 0x7f {
			return bad("a control character")
		}
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return bad("not a path of this host")
	}
	if !strings.HasPrefix(u.Path, "/cb/") {
		return bad("not under /cb/")
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") {
		clean += "/"
	}
	if clean != u.Path {
		return bad(`a ".", ".." or empty segment`)
	}
	return nil
}
