package signup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// env is an api with the console and GitHub sign-in, on a fresh database,
// and a GitHub stand-in its api.yaml keys point at.
type env struct {
	t     *testing.T
	url   string
	db    *dbtest.DB
	users *users.Store
	gh    *githubtest.Server
	// alice is an admin-made account with a password, bob another.
	alice, bob users.User
	log        *bytes.Buffer

	// signup is the signup side on the same database.
	signup *signup.Signup
}

// newEnv is the api as the product builds it (apitest.New) with GitHub
// sign-in against the stand-in: the callback hands an unknown identity to
// signup's Arrive.
func newEnv(t *testing.T) *env { return newEnvWith(t, true) }

// newEnvWith is newEnv, with GitHub sign-in not configured unless configured.
func newEnvWith(t *testing.T, configured bool) *env {
	t.Helper()
	e := &env{t: t, log: new(bytes.Buffer), gh: githubtest.New(t)}
	opts := []apitest.Option{apitest.WithoutSession(), apitest.WithLog(e.logger())}
	if configured {
		opts = append(opts, apitest.WithGitHub(e.gh))
	}
	a := apitest.New(t, opts...)
	e.url, e.db, e.users, e.signup, e.alice = a.URL, &dbtest.DB{Pool: a.DB.Pool, URL: a.DB.URL}, a.Users, a.Signup, a.User
	e.bob = a.AddUser("bob", false)
	return e
}

// logger logs the api's lines, debug too, into e.log, which a failing
// test prints.
func (e *env) logger() *slog.Logger {
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("the api's log:\n%s", e.log.String())
		}
	})
	return slog.New(slog.NewTextHandler(syncWriter{w: e.log}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// syncWriter serializes the log's writes into w.
type syncWriter struct{ w io.Writer }

var logMu sync.Mutex

func (s syncWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	return s.w.Write(p)
}

// link connects GitHub account id to user u, as a connect would.
func (e *env) link(id, userID string) {
	e.t.Helper()
	if _, err := e.db.Pool.Exec(context.Background(), "INSERT INTO identities (idp, subject, user_id) VALUES ('github', $1, $2)", id, userID); err != nil {
		e.t.Fatal(err)
	}
}

// browser is a cookie-keeping client that follows no redirect.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) do(c *http.Client, method, path, body string) (*http.Response, string) {
	e.t.Helper()
	target := path
	if !strings.HasPrefix(path, "http") {
		target = e.url + path
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// begin posts begin {return_to, invite} and answers GitHub's authorize URL.
func (e *env) begin(c *http.Client, returnTo, invite string) string {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"return_to": returnTo, "invite": invite})
	resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", string(body))
	if resp.StatusCode != 200 {
		e.t.Fatalf("begin: %d %s", resp.StatusCode, text)
	}
	var ans signup.BeginAnswer
	if err := json.Unmarshal([]byte(text), &ans); err != nil {
		e.t.Fatal(err)
	}
	return ans.URL
}

// atGitHub is the browser at GitHub's authorize URL: where GitHub sends it back.
func (e *env) atGitHub(authorize string) string {
	e.t.Helper()
	back, err := e.gh.Authorize(authorize)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasPrefix(back, e.url+signup.CallbackPath+"?") {
		e.t.Fatalf("GitHub sends the browser to %q, not the callback", back)
	}
	return back
}

// signInWithGitHub runs the whole sign-in in c as GitHub account a and
// answers the callback's answer.
func (e *env) signInWithGitHub(c *http.Client, a githubtest.Account, returnTo, invite string) (*http.Response, string) {
	e.t.Helper()
	e.gh.SignInAs(a)
	return e.do(c, "GET", e.atGitHub(e.begin(c, returnTo, invite)), "")
}

// loginError is the login_error code a callback answer sends the browser to, "" for none.
func loginError(t *testing.T, resp *http.Response) string {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther {
		return ""
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || u.Path != "/cb/" {
		t.Fatalf("the callback sends the browser to %q", resp.Header.Get("Location"))
	}
	return u.Query().Get("login_error")
}

// onward is where a successful callback's page sends the browser ("" when it is not that page).
func onward(resp *http.Response, body string) string {
	if resp.StatusCode != 200 || !strings.Contains(body, `http-equiv="refresh"`) {
		return ""
	}
	i := strings.Index(body, `id="onward" href="`)
	if i < 0 {
		return ""
	}
	rest := body[i+len(`id="onward" href="`):]
	return strings.ReplaceAll(rest[:strings.Index(rest, `"`)], "&amp;", "&")
}

// me is the console's user of c's session, "" for none.
func (e *env) me(c *http.Client) string {
	e.t.Helper()
	resp, body := e.do(c, "GET", "/cb/api/me", "")
	if resp.StatusCode != 200 {
		return ""
	}
	var u users.User
	json.Unmarshal([]byte(body), &u)
	return u.Name
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// exec runs a statement on the api's database; the test fails if it fails.
func (e *env) exec(stmt string) {
	e.t.Helper()
	if _, err := e.db.Pool.Exec(context.Background(), stmt); err != nil {
		e.t.Fatalf("%s: %v", stmt, err)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func cookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// A known identity of an enabled user: begin stores a flow and sets the
// Lax nonce cookie on /cocoonbox.auth/, GitHub's authorize URL asks for
// user:email with S256, the callback reads the account, drops GitHub's
// token, starts a console session and goes to return_to.
func TestKnownIdentitySignsInAndGoesToReturnTo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.link("1001", e.alice.ID)
	c := e.browser()
	body, _ := json.Marshal(map[string]string{"return_to": "/cb/token?from=github"})
	resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", string(body))
	if resp.StatusCode != 200 {
		t.Fatalf("begin: %d %s", resp.StatusCode, text)
	}
	ck := cookie(resp, signup.LoginCookie)
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/cocoonbox.auth/" || ck.MaxAge != 600 || len(ck.Value) != 43 {
		t.Fatalf("cb_login %+v: want HttpOnly, Lax, Path=/cocoonbox.auth/, 10 min", ck)
	}
	var ans signup.BeginAnswer
	json.Unmarshal([]byte(text), &ans)
	au, err := url.Parse(ans.URL)
	if err != nil || !strings.HasPrefix(ans.URL, e.gh.WebURL+"/login/oauth/authorize?") {
		t.Fatalf("authorize URL %q", ans.URL)
	}
	q := au.Query()
	if q.Get("client_id") != e.gh.ClientID || q.Get("scope") != "user:email" || q.Get("code_challenge_method") != "S256" ||
		q.Get("redirect_uri") != e.url+"/cocoonbox.auth/callback" || len(q.Get("state")) != 43 || len(q.Get("code_challenge")) != 43 || q.Has("prompt") {
		t.Fatalf("authorize query %v", q)
	}
	if n := e.count("SELECT count(*) FROM github_login_flows WHERE expires_at BETWEEN now() + interval '9 min' AND now() + interval '10 min' AND used_at IS NULL AND purpose = 'signin'"); n != 1 {
		t.Fatalf("%d flows of 10 minutes stored", n)
	}
	if n := e.count("SELECT count(*) FROM github_login_flows WHERE state_sha256 = sha256($1::bytea) AND nonce_sha256 = sha256($2::bytea)", []byte(q.Get("state")), []byte(ck.Value)); n != 1 {
		t.Fatal("the flow does not keep the state's and the nonce's SHA-256")
	}

	e.gh.SignInAs(githubtest.Account{ID: 1001, Login: "Alice-GH", Emails: []githubtest.Email{
		{Email: "old@example.com", Verified: true}, {Email: "alice@example.com", Primary: true, Verified: true}}})
	resp, text = e.do(c, "GET", e.atGitHub(ans.URL), "")
	if to := onward(resp, text); to != "/cb/token?from=github" {
		t.Fatalf("callback: %d %s; want the page going on to return_to", resp.StatusCode, text)
	}
	if ck := cookie(resp, signup.LoginCookie); ck == nil || ck.MaxAge >= 0 {
		t.Errorf("the callback leaves cb_login: %+v", ck)
	}
	if s := cookie(resp, console.CookieName); s == nil || s.SameSite != http.SameSiteStrictMode {
		t.Fatalf("no Strict session cookie: %+v", s)
	}
	if who := e.me(c); who != "alice" {
		t.Fatalf("signed in as %q, want alice", who)
	}
	if e.gh.Live() != 0 || len(e.gh.Revoked()) != 1 {
		t.Errorf("GitHub's token not dropped: %d live, %d revoked", e.gh.Live(), len(e.gh.Revoked()))
	}
	if n := e.count("SELECT count(*) FROM identities WHERE subject = '1001' AND login = 'Alice-GH' AND email = 'alice@example.com' AND email_verified"); n != 1 {
		t.Error("the identity does not show the login and primary email of this sign-in")
	}
	if n := e.count("SELECT count(*) FROM github_login_flows WHERE used_at IS NOT NULL AND verifier = '' AND invite = ''"); n != 1 {
		t.Error("the flow is not marked used, or keeps its verifier")
	}
}

// A forged callback changes nothing: the right callback URL from a browser
// without the cookie, from a browser with its own (another flow's)
// cookie, and with a wrong state are all login_error=browser, take no flow
// and start no session; the real browser then signs in with it. A second
// use of a taken flow is failed.
func TestForgedCallbackChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.link("1001", e.alice.ID)
	e.link("2002", e.bob.ID)
	e.gh.SignInAs(githubtest.Verified(1001, "alice-gh", "alice@example.com"))
	victim := e.browser()
	back := e.atGitHub(e.begin(victim, "/cb/", ""))
	victimNonce := ""
	for _, c := range victim.Jar.Cookies(mustURL(e.url + "/cocoonbox.auth/callback")) {
		if c.Name == signup.LoginCookie {
			victimNonce = c.Value
		}
	}

	other := e.browser() // another browser, mid-way through its own sign-in
	e.gh.SignInAs(githubtest.Verified(2002, "bob-gh", "bob@example.com"))
	otherBack := e.atGitHub(e.begin(other, "/cb/", ""))

	wrongState, _ := url.Parse(back)
	q := wrongState.Query()
	q.Set("state", strings.Repeat("A", 43))
	wrongState.RawQuery = q.Encode()
	swapped, _ := url.Parse(back) // the victim's code with the other browser's state
	sq := swapped.Query()
	oq, _ := url.Parse(otherBack)
	sq.Set("state", oq.Query().Get("state"))
	swapped.RawQuery = sq.Encode()

	for name, try := range map[string]struct {
		c      *http.Client
		target string
	}{
		"no cookie":                {e.browser(), back},
		"another browser's cookie": {other, back},
		"wrong state":              {victim, wrongState.String()},
		"another flow's state":     {victim, swapped.String()},
	} {
		resp, text := e.do(try.c, "GET", try.target, "")
		if code := loginError(t, resp); code != signup.ErrBrowser {
			t.Errorf("%s: %d %s, login_error %q; want browser", name, resp.StatusCode, text, code)
		}
		if ck := cookie(resp, signup.LoginCookie); ck != nil {
			t.Errorf("%s: the answer touched cb_login: %+v", name, ck)
		}
		if n := e.count("SELECT count(*) FROM github_login_flows WHERE used_at IS NOT NULL"); n != 0 {
			t.Fatalf("%s: took a flow", name)
		}
		if n := e.count("SELECT count(*) FROM console_sessions"); n != 0 {
			t.Fatalf("%s: started a session", name)
		}
	}
	if e.gh.Calls("POST /login/oauth/access_token") != 0 {
		t.Fatal("a forged callback redeemed a code")
	}
	resp, text := e.do(victim, "GET", back, "")
	if onward(resp, text) != "/cb/" || e.me(victim) != "alice" {
		t.Fatalf("the real callback after the forged ones: %d %s", resp.StatusCode, text)
	}
	resp, text = e.do(other, "GET", otherBack, "")
	if onward(resp, text) != "/cb/" || e.me(other) != "bob" {
		t.Fatalf("the other browser's own callback: %d %s", resp.StatusCode, text)
	}
	// The victim's flow again, with its nonce put back: used, so failed.
	replay := e.browser()
	u, _ := url.Parse(e.url + "/cocoonbox.auth/")
	replay.Jar.SetCookies(u, []*http.Cookie{{Name: signup.LoginCookie, Value: victimNonce}})
	resp, text = e.do(replay, "GET", back, "")
	if code := loginError(t, resp); code != signup.ErrFailed || e.me(replay) != "" {
		t.Fatalf("a second use of the flow: %d %s, login_error %q; want failed", resp.StatusCode, text, code)
	}
}
