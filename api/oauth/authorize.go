package oauth

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/signin"
)

// The authorization endpoint (OAuth 2.1 §4.1.1-4.1.2, RFC 9207) as the
// console's consent page for agents: the page checks the request through
// POST /cb/api/oauth/check, asks the signed-in user (signing in first
// when there is no session), and on Allow (POST /cb/api/oauth/approve,
// with the caps the user chose) sends the browser to the client's
// redirect URI with code, state and iss; on Deny with access_denied. A
// client or redirect URI the api does not trust is a 400 the page shows,
// never a redirect. api/signin serves these paths and hands this the
// requests whose client is not first-party.
//
// Contract: OAuth for agents (MCP authorization 2025-11-25), Authorization.

// OAuth error codes of the authorization and token endpoints (OAuth 2.1
// §4.1.2.1, §3.2.4; RFC 8707 §2).
const (
	errInvalidRequest          = "invalid_request"
	errInvalidClient           = "invalid_client"
	errInvalidGrant            = "invalid_grant"
	errUnauthorizedClient      = "unauthorized_client"
	errUnsupportedGrantType    = "unsupported_grant_type"
	errUnsupportedResponseType = "unsupported_response_type"
	errInvalidScope            = "invalid_scope"
	errInvalidTarget           = "invalid_target"
	errAccessDenied            = "access_denied"
	errServerError             = "server_error"
)

// Caps the consent page offers and their defaults (the contract's).
const (
	MaxBoxesLimit     = 16
	DefaultMaxBoxes   = 2
	DefaultMaxRunning = 1
	DefaultDays       = 30
)

// Days are the grant lifetimes the user may choose.
var Days = []int{1, 7, 30, 90}

// maxState bounds the client's opaque state, echoed back.
const maxState = 512

// User is the console's signed-in user, as the consent page shows it.
type User struct{ ID, Name string }

// Agents serves the agents' half of the endpoints api/signin shares with
// the first-party sign-in: the consent page and its calls, the token
// endpoint's grants and revocation. Build it with NewAgents.
type Agents struct {
	issuer   string
	resource string
	clients  *Clients
	grants   *Grants
	session  func(*http.Request) (User, bool)
	log      *slog.Logger
	mux      *http.ServeMux
}

// NewAgents is the authorization server of issuer (oauth.public_url):
// clients found by clients, grants kept by grants, the console's session
// answered by session.
func NewAgents(issuer string, clients *Clients, grants *Grants, session func(*http.Request) (User, bool), log *slog.Logger) *Agents {
	a := &Agents{issuer: issuer, resource: issuer + ResourcePath, clients: clients, grants: grants, session: session, log: log, mux: http.NewServeMux()}
	a.mux.HandleFunc("GET "+AuthorizationPath, a.authorizePage)
	a.mux.HandleFunc("POST /cb/api/oauth/check", a.check)
	a.mux.HandleFunc("POST /cb/api/oauth/approve", a.approve)
	a.mux.HandleFunc("POST /cb/api/oauth/deny", a.deny)
	a.mux.HandleFunc("POST "+TokenPath, a.token)
	a.mux.HandleFunc("POST "+RevocationPath, a.revoke)
	return a
}

// ServeHTTP answers the requests api/signin hands over.
func (a *Agents) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// authError is an OAuth error of the authorization endpoint. Redirect is
// false when the client or its redirect URI is the problem: then the page
// shows it and nothing goes anywhere.
type authError struct {
	Code, Description string
	Redirect          bool
}

func redirectable(code, format string, args ...any) *authError {
	return &authError{Code: code, Description: fmt.Sprintf(format, args...), Redirect: true}
}

// authRequest is a checked authorization request.
type authRequest struct {
	Client      Client
	RedirectURI string
	State       string
	Challenge   string
	Resource    string
	q           url.Values
}

// parseRequest checks an authorization request (the page's query, and the
// {query} of check, approve and deny). The client and the redirect URI
// first, whose errors are never redirected; then, each going back to the
// client: a parameter twice, response_type other than code
// (unsupported_response_type), PKCE other than S256 with a 43-character
// challenge (invalid_request), a scope other than boxes (invalid_scope), a
// resource outside <issuer>/cocoonbox.mcp (invalid_target). An absent
// scope or resource means boxes and the whole resource.
func (a *Agents) parseRequest(ctx context.Context, q url.Values) (*authRequest, *authError) {
	if len(q["client_id"]) != 1 || q.Get("client_id") == "" {
		return nil, &authError{Code: errInvalidRequest, Description: "client_id must be given once"}
	}
	client, err := a.clients.Lookup(ctx, q.Get("client_id"))
	if err != nil {
		return nil, &authError{Code: errInvalidClient, Description: "the client is not trusted: " + err.Error()}
	}
	if len(q["redirect_uri"]) > 1 {
		return nil, &authError{Code: errInvalidRequest, Description: "redirect_uri is given more than once"}
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(client.RedirectURIs) == 1 {
		redirect = client.RedirectURIs[0] // OAuth 2.1 §4.1.1: optional with one registered
	}
	if !redirectAllowed(client.RedirectURIs, redirect) {
		return nil, &authError{Code: errInvalidRequest, Description: fmt.Sprintf("redirect_uri %s is not one the client registered (%s)",
			quote(redirect), strings.Join(client.RedirectURIs, ", "))}
	}
	// From here on the client and its redirect URI are good (§4.1.2.1).
	// A refusal now goes back to the client: ar is answered with it.
	ar := &authRequest{Client: client, RedirectURI: redirect, q: q}
	for name, v := range q {
		if len(v) > 1 {
			return ar, redirectable(errInvalidRequest, "%s is given more than once", name)
		}
	}
	ar.State = q.Get("state")
	if len(ar.State) > maxState {
		return ar, redirectable(errInvalidRequest, "state is %d bytes: at most %d", len(ar.State), maxState)
	}
	switch rt := q.Get("response_type"); rt {
	case "code":
	case "":
		return ar, redirectable(errInvalidRequest, "response_type is missing: it must be code")
	default:
		return ar, redirectable(errUnsupportedResponseType, "response_type %s is not supported: it must be code", quote(rt))
	}
	switch m := q.Get("code_challenge_method"); m {
	case "S256":
	case "":
		return ar, redirectable(errInvalidRequest, "code_challenge_method is missing: PKCE with S256 is required")
	default:
		return ar, redirectable(errInvalidRequest, "code_challenge_method %s is not supported: it must be S256", quote(m))
	}
	ar.Challenge = q.Get("code_challenge")
	if err := signin.CheckChallenge(ar.Challenge); err != nil {
		return ar, redirectable(errInvalidRequest, "%v", err)
	}
	if scope := q.Get("scope"); scope != "" && scope != Scope {
		return ar, redirectable(errInvalidScope, "scope %s is not allowed: the one scope is %s", quote(scope), Scope)
	}
	ar.Resource = q.Get("resource")
	if ar.Resource != "" {
		if err := a.checkResource(ar.Resource); err != nil {
			return ar, redirectable(errInvalidTarget, "%v", err)
		}
	}
	return ar, nil
}

// checkResource accepts the protected resource <issuer>/cocoonbox.mcp or
// a URL under it (RFC 8707 §2: absolute, no fragment), compared as a
// string with no . or .. segment and no query: the token is for the
// whole resource either way.
func (a *Agents) checkResource(res string) error {
	u, err := url.Parse(res)
	bad := err != nil || u.Fragment != "" || strings.Contains(res, "#") || u.RawQuery != "" || strings.Contains(res, "?")
	if !bad {
		bad = res != a.resource && !strings.HasPrefix(res, a.resource+"/")
	}
	if !bad {
		for _, seg := range strings.Split(strings.TrimPrefix(res, a.resource), "/") {
			if seg == "." || seg == ".." || strings.Contains(seg, "%") {
				bad = true
			}
		}
	}
	if bad {
		return fmt.Errorf("resource %s is not %s or a URL under it", quote(res), a.resource)
	}
	return nil
}

// redirectAllowed says whether uri is one of registered exactly, or, for
// a registered http loopback URI, the same but for the port (RFC 8252
// §7.3: a native client's loopback port is chosen when it runs).
func redirectAllowed(registered []string, uri string) bool {
	if uri == "" {
		return false
	}
	if slices.Contains(registered, uri) {
		return true
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" || !LoopbackHost(u.Hostname()) || u.User != nil || u.Fragment != "" {
		return false
	}
	for _, r := range registered {
		ru, err := url.Parse(r)
		if err == nil && ru.Scheme == "http" && ru.Hostname() == u.Hostname() && ru.Path == u.Path && ru.RawQuery == u.RawQuery {
			return true
		}
	}
	return false
}

// quote shows a parameter's value in an error, cut short.
func quote(s string) string {
	const most = 80
	if len(s) > most {
		s = s[:most] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "\uFFFD") + "\""
}

// callback is redirectURI with params and iss (RFC 9207) added to its
// query.
func (a *Agents) callback(redirectURI string, params url.Values) string {
	u, err := url.Parse(redirectURI)
	if err != nil { // checked before: a registered redirect URI parses
		return redirectURI
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	q.Set("iss", a.issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// errorCallback is the redirect of a refusal (§4.1.2.1), with state and iss.
func (a *Agents) errorCallback(redirectURI string, q url.Values, e *authError) string {
	p := url.Values{"error": {e.Code}, "error_description": {e.Description}}
	if st := q.Get("state"); st != "" && len(st) <= maxState {
		p.Set("state", st)
	}
	return a.callback(redirectURI, p)
}

//go:embed authorize.html
var authorizeHTML string

// authorizeTmpl is the console's consent page with this page's slots.
var authorizeTmpl = console.NewConsentPage(authorizeHTML)

// authorizePage is GET /cb/oauth/authorize for an agent.
func (a *Agents) authorizePage(w http.ResponseWriter, r *http.Request) {
	console.SetConsentHeaders(w.Header())
	q := r.URL.Query()
	ar, perr := a.parseRequest(r.Context(), q)
	if perr != nil && perr.Redirect {
		http.Redirect(w, r, a.errorCallback(redirectOf(ar, q), q, perr), http.StatusSeeOther)
		return
	}
	page := struct {
		Error, Detail, Query string
		MaxBoxesLimit        int
		Days                 []int
	}{Query: r.URL.RawQuery, MaxBoxesLimit: MaxBoxesLimit, Days: Days}
	status := http.StatusOK
	if perr != nil {
		page.Error, page.Detail = console.AuthorizeMessage(perr.Code), perr.Description
		status = http.StatusBadRequest
	}
	authorizeTmpl.Write(w, status, page)
}

// redirectOf is where a redirectable error goes: the checked redirect URI
// parseRequest answers with it.
func redirectOf(ar *authRequest, _ url.Values) string { return ar.RedirectURI }

// consoleBody is the body of the consent page's calls.
type consoleBody struct {
	Query      string `json:"query"`
	MaxBoxes   *int   `json:"max_boxes"`
	MaxRunning *int   `json:"max_running"`
	Days       *int   `json:"days"`
}

// refusal is a console call's error answer; Redirect is set when the
// error goes back to the client.
type refusal struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Redirect    string `json:"redirect,omitempty"`
	// Message is the sentence the consent page shows a person
	// (console.AuthorizeMessage); Description stays for programs.
	Message string `json:"message"`
}

// MarshalJSON writes r with its Message, so no refusal goes out without
// the person's sentence.
func (r refusal) MarshalJSON() ([]byte, error) {
	type plain refusal
	r.Message = console.AuthorizeMessage(r.Error)
	return json.Marshal(plain(r))
}

// request reads a console call's body and its request, answering for it
// when the body or the request is bad or there is no session (401
// login_required). It takes JSON only, which a cross-site form cannot send
// (with the SameSite=Strict session cookie, the CSRF defence).
func (a *Agents) request(w http.ResponseWriter, r *http.Request) (*authRequest, consoleBody, User, bool) {
	var body consoleBody
	if err := server.ReadJSON(r, 16<<10, &body); errors.Is(err, server.ErrNotJSON) {
		server.WriteJSON(w, http.StatusUnsupportedMediaType, refusal{Error: errInvalidRequest, Description: err.Error()})
		return nil, body, User{}, false
	} else if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, refusal{Error: errInvalidRequest, Description: `the body must be {"query": "...", ...}: ` + err.Error()})
		return nil, body, User{}, false
	}
	q, err := url.ParseQuery(body.Query)
	if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, refusal{Error: errInvalidRequest, Description: "query is not a URL query: " + err.Error()})
		return nil, body, User{}, false
	}
	ar, perr := a.parseRequest(r.Context(), q)
	if perr != nil {
		ref := refusal{Error: perr.Code, Description: perr.Description}
		if perr.Redirect {
			ref.Redirect = a.errorCallback(redirectOf(ar, q), q, perr)
		}
		server.WriteJSON(w, http.StatusBadRequest, ref)
		return nil, body, User{}, false
	}
	u, ok := a.session(r)
	if !ok {
		server.WriteJSON(w, http.StatusUnauthorized, refusal{Error: "login_required", Description: "sign in to the console first"})
		return nil, body, User{}, false
	}
	return ar, body, u, true
}

// checkAnswer is what the consent page shows.
type checkAnswer struct {
	Account bool `json:"account"`
	// Agent tells the page apart from the first-party sign-in's.
	Agent        bool   `json:"agent"`
	ClientID     string `json:"client_id"`
	ClientName   string `json:"client_name"`
	VerifiedHost string `json:"verified_host"`
	RedirectHost string `json:"redirect_host"`
	Loopback     bool   `json:"loopback"`
	LiveGrant    bool   `json:"live_grant"`
	User         string `json:"user"`
	MaxBoxes     int    `json:"max_boxes"`
	MaxRunning   int    `json:"max_running"`
	Days         int    `json:"days"`
}

// check is POST /cb/api/oauth/check {query}.
func (a *Agents) check(w http.ResponseWriter, r *http.Request) {
	ar, _, u, ok := a.request(w, r)
	if !ok {
		return
	}
	live, err := a.grants.LiveGrant(r.Context(), u.ID, ar.Client.ID)
	if err != nil {
		a.serverError(w, r, err)
		return
	}
	host, loopback := ar.RedirectURI, false
	if ru, err := url.Parse(ar.RedirectURI); err == nil {
		if ru.Host != "" {
			host = ru.Host
		} else {
			host = ru.Scheme + ":" // a private-use scheme: the app that claims it
		}
		loopback = ru.Scheme == "http" && LoopbackHost(ru.Hostname())
	}
	server.WriteJSON(w, http.StatusOK, checkAnswer{Account: true, Agent: true, ClientID: ar.Client.ID, ClientName: ar.Client.Name,
		VerifiedHost: ar.Client.VerifiedHost, RedirectHost: host, Loopback: loopback, LiveGrant: live, User: u.Name,
		MaxBoxes: DefaultMaxBoxes, MaxRunning: DefaultMaxRunning, Days: DefaultDays})
}

// caps reads the approve's caps, each defaulted when absent.
func caps(b consoleBody) (maxBoxes, maxRunning, days int, err error) {
	maxBoxes, maxRunning, days = DefaultMaxBoxes, DefaultMaxRunning, DefaultDays
	if b.MaxBoxes != nil {
		maxBoxes = *b.MaxBoxes
	}
	if b.MaxRunning != nil {
		maxRunning = *b.MaxRunning
	}
	if b.Days != nil {
		days = *b.Days
	}
	switch {
	case maxBoxes < 1 || maxBoxes > MaxBoxesLimit:
		err = fmt.Errorf("max_boxes %d: from 1 to %d", maxBoxes, MaxBoxesLimit)
	case maxRunning < 1 || maxRunning > maxBoxes:
		err = fmt.Errorf("max_running %d: from 1 to max_boxes (%d)", maxRunning, maxBoxes)
	case !slices.Contains(Days, days):
		err = fmt.Errorf("days %d: one of 1, 7, 30, 90", days)
	}
	return maxBoxes, maxRunning, days, err
}

// approve is POST /cb/api/oauth/approve {query, max_boxes, max_running,
// days}: the user's Allow. It stores a one-use code (CodeTTL) and answers
// {"redirect"}: the redirect URI with code, state and iss. Caps out of
// range are a 400 the page shows.
func (a *Agents) approve(w http.ResponseWriter, r *http.Request) {
	ar, body, u, ok := a.request(w, r)
	if !ok {
		return
	}
	maxBoxes, maxRunning, days, err := caps(body)
	if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, refusal{Error: errInvalidRequest, Description: err.Error()})
		return
	}
	code := newSecret(CodePrefix)
	d := a.grants.digest(code)
	now := a.grants.Now()
	if _, err := a.grants.pool.Exec(r.Context(), `INSERT INTO oauth_codes (digest, user_id, client_id, client_name, verified_host,
	  redirect_uri, code_challenge, resource, max_boxes, max_running, days, created_at, expires_at, refresh)
	  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		d[:], u.ID, ar.Client.ID, ar.Client.Name, ar.Client.VerifiedHost, ar.RedirectURI, ar.Challenge, ar.Resource,
		maxBoxes, maxRunning, days, now, now.Add(CodeTTL), ar.Client.Refreshes()); err != nil {
		a.serverError(w, r, fmt.Errorf("store a code: %w", err))
		return
	}
	a.log.InfoContext(r.Context(), "agent approved", "user", u.ID, "client", ar.Client.ID, "max_boxes", maxBoxes, "max_running", maxRunning, "days", days)
	p := url.Values{"code": {code}}
	if ar.State != "" {
		p.Set("state", ar.State)
	}
	server.WriteJSON(w, http.StatusOK, map[string]string{"redirect": a.callback(ar.RedirectURI, p)})
}

// deny is POST /cb/api/oauth/deny {query}: access_denied to the client.
func (a *Agents) deny(w http.ResponseWriter, r *http.Request) {
	ar, _, _, ok := a.request(w, r)
	if !ok {
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]string{
		"redirect": a.errorCallback(ar.RedirectURI, ar.q, &authError{Code: errAccessDenied, Description: "the user denied the agent"}),
	})
}

// serverError logs err and answers server_error, never err's text.
func (a *Agents) serverError(w http.ResponseWriter, r *http.Request, err error) {
	a.log.ErrorContext(r.Context(), "oauth failed", "path", r.URL.Path, "err", err, "request_id", server.RequestID(r.Context()))
	server.WriteJSON(w, http.StatusInternalServerError, refusal{Error: errServerError, Description: "the api failed; try again"})
}
