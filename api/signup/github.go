package signup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// GitHubApp is the GitHub OAuth App that signs people in (apart from
// Connect's GitHub App): its id and secret (LOGIN_GITHUB_CLIENT_ID and
// LOGIN_GITHUB_CLIENT_SECRET) and GitHub's URLs (api.yaml
// signup.github.web_url and api_url: github.com, or a GitHub Enterprise
// Server, or the tests' stand-in).
type GitHubApp struct {
	ClientID string
	Secret   Secret
	// WebURL is where the browser is sent (…/login/oauth/authorize) and the
	// code redeemed (…/login/oauth/access_token): https://github.com.
	WebURL string
	// APIURL is the REST API (…/user, …/user/emails): https://api.github.com,
	// or https://HOST/api/v3 for a GitHub Enterprise Server.
	APIURL string
	// Roots, when not nil, are the only roots GitHub's certificates may
	// chain to (signup.github.ca_file); nil is the system's.
	Roots *x509.CertPool
}

// Secret is the OAuth App's client secret: it prints as "[secret]".
type Secret string

func (Secret) String() string   { return "[secret]" }
func (Secret) GoString() string { return "[secret]" }

// githubTimeout bounds each call to GitHub.
const githubTimeout = 15 * time.Second

// githubClient talks to GitHub for one sign-in at a time.
type githubClient struct {
	app  GitHubApp
	http *http.Client
}

func newGitHubClient(app GitHubApp) *githubClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if app.Roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: app.Roots, MinVersion: tls.VersionTLS12}
	}
	app.WebURL = strings.TrimSuffix(app.WebURL, "/")
	app.APIURL = strings.TrimSuffix(app.APIURL, "/")
	return &githubClient{app: app, http: &http.Client{Transport: tr, Timeout: githubTimeout,
		// GitHub's answers are never redirects we follow: a 3xx is an error.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// authorizeURL is GitHub's consent page for a flow (scope user:email, PKCE
// S256). pick asks GitHub for its account picker (prompt=select_account),
// for a connect: the person may mean another GitHub account than the one
// signed in at GitHub.
func (g *githubClient) authorizeURL(redirectURI, state, challenge string, pick bool) string {
	q := url.Values{
		"client_id":             {g.app.ClientID},
		"redirect_uri":          {redirectURI},
		"scope":                 {"user:email"},
		"state":                 {state},
		"code_challenge":        {challenge},
		"code_challenge_method": {"S256"},
	}
	if pick {
		q.Set("prompt", "select_account")
	}
	return g.app.WebURL + "/login/oauth/authorize?" + q.Encode()
}

// githubError is a failed call to GitHub, with what GitHub said (its
// OAuth error code, or the status and rate-limit headers).
type githubError struct {
	Step    string // "redeem the code", "read /user", ...
	Code    string // bad_verification_code, ... (OAuth errors)
	Status  int
	Limited bool   // a rate limit (403 or 429 with x-ratelimit-remaining 0, or Retry-After)
	Reset   string // x-ratelimit-reset or Retry-After as GitHub sent it
	Detail  string
}

func (e *githubError) Error() string {
	s := "github: " + e.Step + ": "
	switch {
	case e.Code != "":
		s += e.Code
	case e.Limited:
		s += fmt.Sprintf("rate limited (%d, reset %s)", e.Status, e.Reset)
	default:
		s += "status " + strconv.Itoa(e.Status)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// redeem exchanges a code for an access token (GitHub's
// POST /login/oauth/access_token, JSON answer). GitHub answers a bad code
// with 200 and {"error":"bad_verification_code"}.
func (g *githubClient) redeem(ctx context.Context, code, redirectURI, verifier string) (string, error) {
	form := url.Values{"client_id": {g.app.ClientID}, "client_secret": {string(g.app.Secret)},
		"code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	req, err := http.NewRequestWithContext(ctx, "POST", g.app.WebURL+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	var ans struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := g.do(req, "redeem the code", &ans); err != nil {
		return "", err
	}
	if ans.Error != "" {
		return "", &githubError{Step: "redeem the code", Code: ans.Error, Status: 200, Detail: ans.Description}
	}
	if ans.AccessToken == "" || !strings.EqualFold(ans.TokenType, "bearer") {
		return "", &githubError{Step: "redeem the code", Status: 200, Detail: "no bearer access_token in the answer"}
	}
	return ans.AccessToken, nil
}

// githubUser is what the sign-in reads of a GitHub account.
type githubUser struct {
	ID            string // the numeric account id, as decimal
	Login         string
	Email         string // the primary address, "" when none
	EmailVerified bool
}

// user reads /user and /user/emails with token.
func (g *githubClient) user(ctx context.Context, token string) (githubUser, error) {
	var u struct {
		ID    json.Number `json:"id"`
		Login string      `json:"login"`
	}
	if err := g.get(ctx, token, "/user", &u); err != nil {
		return githubUser{}, err
	}
	id := u.ID.String()
	if n, err := strconv.ParseUint(id, 10, 63); err != nil || n == 0 || u.Login == "" {
		return githubUser{}, &githubError{Step: "read /user", Status: 200, Detail: fmt.Sprintf("no numeric id and login (id %q)", id)}
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := g.get(ctx, token, "/user/emails", &emails); err != nil {
		return githubUser{}, err
	}
	out := githubUser{ID: id, Login: u.Login}
	for _, e := range emails {
		if e.Primary {
			out.Email, out.EmailVerified = e.Email, e.Verified
		}
	}
	return out, nil
}

// revoke drops token at GitHub (DELETE /applications/{client_id}/token,
// the app's basic auth): the sign-in read what it needs. The app's
// authorization stays, so the next sign-in asks no consent.
func (g *githubClient) revoke(ctx context.Context, token string) error {
	body, _ := json.Marshal(map[string]string{"access_token": token})
	req, err := http.NewRequestWithContext(ctx, "DELETE", g.app.APIURL+"/applications/"+url.PathEscape(g.app.ClientID)+"/token", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.SetBasicAuth(g.app.ClientID, string(g.app.Secret))
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Content-Type", "application/json")
	return g.do(req, "revoke the token", nil)
}

func (g *githubClient) get(ctx context.Context, token, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", g.app.APIURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	return g.do(req, "read "+path, v)
}

// do sends req and decodes a 2xx answer's JSON into v (nil: none read);
// any other answer is a *githubError.
func (g *githubClient) do(req *http.Request, step string, v any) error {
	req.Header.Set("User-Agent", "cocoonbox-api")
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("github: %s: %w", step, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("github: %s: read the answer: %w", step, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &githubError{Step: step, Status: resp.StatusCode}
		// GitHub's rate limits: 403 or 429, with x-ratelimit-remaining 0
		// (the primary limit) or Retry-After (a secondary one).
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
			if ra := resp.Header.Get("Retry-After"); ra != "" {
				e.Limited, e.Reset = true, ra+"s"
			} else if resp.Header.Get("X-Ratelimit-Remaining") == "0" {
				e.Limited, e.Reset = true, resp.Header.Get("X-Ratelimit-Reset")
			}
		}
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &m) == nil {
			e.Detail = m.Message
		}
		return e
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &githubError{Step: step, Status: resp.StatusCode, Detail: "not the JSON GitHub answers: " + err.Error()}
	}
	return nil
}

// limited reports whether err is GitHub's rate limit.
func limited(err error) bool {
	var ge *githubError
	return errors.As(err, &ge) && ge.Limited
}
