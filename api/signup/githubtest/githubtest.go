// Package githubtest is a GitHub stand-in for tests: the OAuth App web
// flow (GET /login/oauth/authorize, POST /login/oauth/access_token with
// PKCE), the REST API's GET /user, GET /user/emails and
// DELETE /applications/{client_id}/token under /api/v3 (a GitHub
// Enterprise Server's layout), over TLS on loopback, with the answers and
// failures GitHub documents:
//
//   - the person declines: the callback gets error=access_denied
//     (docs.github.com, "Troubleshooting authorization request errors");
//   - a bad, used or expired code: 200 with {"error":"bad_verification_code"},
//     a wrong secret incorrect_client_credentials, another redirect URI
//     redirect_uri_mismatch ("Troubleshooting OAuth app access token
//     request errors");
//   - a primary email that is not verified (GET /user/emails' verified);
//   - the REST rate limits: 403 with x-ratelimit-remaining 0 and
//     x-ratelimit-reset (the primary limit), 429 with retry-after (a
//     secondary one) ("Rate limits for the REST API").
package githubtest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Email is one of GET /user/emails.
type Email struct {
	Email      string  `json:"email"`
	Primary    bool    `json:"primary"`
	Verified   bool    `json:"verified"`
	Visibility *string `json:"visibility"`
}

// Account is a GitHub account of the stand-in.
type Account struct {
	ID     int64
	Login  string
	Emails []Email
}

// Verified is an account with one verified primary address.
func Verified(id int64, login, email string) Account {
	return Account{ID: id, Login: login, Emails: []Email{{Email: email, Primary: true, Verified: true}}}
}

// Server is the stand-in. Its zero behaviour signs every authorize in as
// the account SignInAs set, at once (an App the person authorized before).
type Server struct {
	// WebURL is the web origin (web_url), APIURL the REST API (api_url).
	WebURL, APIURL string
	// ClientID and ClientSecret are the OAuth App's.
	ClientID, ClientSecret string
	// CAFile is a PEM file of the server's certificate (ca_file).
	CAFile string
	// SPKI is the base64 SHA-256 of the certificate's public key, for
	// Chromium's --ignore-certificate-errors-spki-list.
	SPKI string

	srv *httptest.Server
	mu  sync.Mutex
	as  *Account
	// deny: the next authorize answers access_denied.
	deny bool
	// limit: the REST API answers this rate limit (403 or 429); 0 none.
	limit   int
	codes   map[string]grant
	tokens  map[string]Account
	revoked []string
	calls   map[string]int
}

type grant struct {
	account     Account
	redirectURI string
	challenge   string
	expires     time.Time
}

// New starts a stand-in, stopped when t ends.
func New(t testing.TB) *Server {
	s := &Server{ClientID: "Ov23liStandIn0000001", ClientSecret: "standin-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		codes: map[string]grant{}, tokens: map[string]Account{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", s.authorize)
	mux.HandleFunc("POST /login/oauth/access_token", s.accessToken)
	mux.HandleFunc("GET /api/v3/user", s.api(s.user))
	mux.HandleFunc("GET /api/v3/user/emails", s.api(s.emails))
	mux.HandleFunc("DELETE /api/v3/applications/{client}/token", s.revoke)
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[r.Method+" "+r.URL.Path]++
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	s.WebURL, s.APIURL = s.srv.URL, s.srv.URL+"/api/v3"
	cert := s.srv.Certificate()
	s.CAFile = filepath.Join(t.TempDir(), "github-standin-ca.pem")
	if err := os.WriteFile(s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	s.SPKI = base64.StdEncoding.EncodeToString(sum[:])
	return s
}

// SignInAs makes every following authorize sign a as in.
func (s *Server) SignInAs(a Account) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.as = &a
}

// DenyNext makes the next authorize answer error=access_denied (the
// person pressed Cancel).
func (s *Server) DenyNext() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = true
}

// RateLimit makes the REST API answer GitHub's rate limit: 403 (primary:
// x-ratelimit-remaining 0) or 429 (secondary: retry-after); 0 ends it.
func (s *Server) RateLimit(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = status
}

// Revoked are the tokens revoked through DELETE /applications/{id}/token.
func (s *Server) Revoked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.revoked...)
}

// Live is how many access tokens are issued and not revoked.
func (s *Server) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

// Calls is how many requests of "METHOD /path" the stand-in served.
func (s *Server) Calls(methodPath string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[methodPath]
}

// Client is an HTTP client that trusts the stand-in and follows no redirect.
func (s *Server) Client() *http.Client {
	c := s.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// Authorize does what a browser does at GitHub's authorize URL: it
// answers where GitHub sends the browser back (the App's callback with
// code and state, or with error).
func (s *Server) Authorize(authorizeURL string) (string, error) {
	resp, err := s.Client().Get(authorizeURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("authorize: %s", resp.Status)
	}
	return resp.Header.Get("Location"), nil
}

func randomToken(prefix string) string {
	var b [20]byte
	rand.Read(b[:])
	return prefix + strings.TrimRight(base64.RawURLEncoding.EncodeToString(b[:]), "=")
}

// authorize is GET /login/oauth/authorize: a bad client or redirect URI is
// an error page (GitHub never redirects those); else back to redirect_uri
// with a code, or error=access_denied.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != s.ClientID {
		http.Error(w, "The client_id is unknown", http.StatusNotFound)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || back.Scheme == "" || back.Host == "" {
		http.Error(w, "The redirect_uri MUST match the registered callback URL for this application.", http.StatusBadRequest)
		return
	}
	if !strings.Contains(" "+q.Get("scope")+" ", " user:email ") || q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
		http.Error(w, "the stand-in wants scope user:email and an S256 code_challenge", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	deny, as := s.deny, s.as
	s.deny = false
	s.mu.Unlock()
	v := url.Values{"state": {q.Get("state")}}
	switch {
	case deny:
		v.Set("error", "access_denied")
		v.Set("error_description", "The user has denied your application access.")
		v.Set("error_uri", "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied")
	case as == nil:
		http.Error(w, "the stand-in has no account to sign in (SignInAs)", http.StatusInternalServerError)
		return
	default:
		code := randomToken("")[:20]
		s.mu.Lock()
		s.codes[code] = grant{account: *as, redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), expires: time.Now().Add(10 * time.Minute)}
		s.mu.Unlock()
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// accessToken is POST /login/oauth/access_token: GitHub answers its
// errors with 200 and an error field.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	oauthErr := func(code, desc string) {
		writeJSON(w, http.StatusOK, map[string]string{"error": code, "error_description": desc,
			"error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#" + strings.ReplaceAll(code, "_", "-")})
	}
	if r.PostForm.Get("client_id") != s.ClientID || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("client_secret")), []byte(s.ClientSecret)) != 1 {
		oauthErr("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	code := r.PostForm.Get("code")
	s.mu.Lock()
	g, ok := s.codes[code]
	delete(s.codes, code)
	s.mu.Unlock()
	if !ok || time.Now().After(g.expires) {
		oauthErr("bad_verification_code", "The code passed is incorrect or expired.")
		return
	}
	if r.PostForm.Get("redirect_uri") != g.redirectURI {
		oauthErr("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		oauthErr("bad_verification_code", "The code_verifier does not match the code_challenge.")
		return
	}
	token := randomToken("gho_")
	s.mu.Lock()
	s.tokens[token] = g.account
	s.mu.Unlock()
	if r.Header.Get("Accept") != "application/json" {
		// GitHub answers form-encoded unless asked for JSON.
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		fmt.Fprint(w, url.Values{"access_token": {token}, "scope": {"user:email"}, "token_type": {"bearer"}}.Encode())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"access_token": token, "scope": "user:email", "token_type": "bearer"})
}

// api checks the bearer token and the rate limit before h.
func (s *Server) api(h func(http.ResponseWriter, Account)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		limit := s.limit
		a, ok := s.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		s.mu.Unlock()
		switch limit {
		case http.StatusForbidden:
			w.Header().Set("X-Ratelimit-Limit", "5000")
			w.Header().Set("X-Ratelimit-Remaining", "0")
			w.Header().Set("X-Ratelimit-Used", "5000")
			w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
			w.Header().Set("X-Ratelimit-Resource", "core")
			writeJSON(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded for user ID " + strconv.FormatInt(a.ID, 10) + ".",
				"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
			return
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "60")
			writeJSON(w, http.StatusTooManyRequests, map[string]string{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
				"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
			return
		}
		if !ok {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
			return
		}
		w.Header().Set("X-Ratelimit-Remaining", "4999")
		h(w, a)
	}
}

func (s *Server) user(w http.ResponseWriter, a Account) {
	writeJSON(w, http.StatusOK, map[string]any{"login": a.Login, "id": a.ID, "node_id": "U_standin", "type": "User", "site_admin": false,
		"name": nil, "email": nil, "html_url": s.WebURL + "/" + a.Login})
}

func (s *Server) emails(w http.ResponseWriter, a Account) {
	out := a.Emails
	if out == nil {
		out = []Email{}
	}
	writeJSON(w, http.StatusOK, out)
}

// revoke is DELETE /applications/{client_id}/token: the App's basic auth.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != s.ClientID || secret != s.ClientSecret || r.PathValue("client") != s.ClientID {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Invalid request"})
		return
	}
	s.mu.Lock()
	_, live := s.tokens[body.AccessToken]
	delete(s.tokens, body.AccessToken)
	if live {
		s.revoked = append(s.revoked, body.AccessToken)
	}
	s.mu.Unlock()
	if !live {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
