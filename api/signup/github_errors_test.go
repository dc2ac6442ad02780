package signup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"

	"github.com/cocoonbox/cocoonbox/api/signup"
)

// Every failure and refusal of GitHub's side and of ours goes to
// /cb/?login_error=CODE with the contract's code, signs nobody in, and
// leaves no GitHub token behind.
func TestEveryFailureGoesToLoginError(t *testing.T) {
	t.Parallel()
	known := githubtest.Verified(1001, "alice-gh", "alice@example.com")
	for _, tc := range []struct {
		name string
		code string
		run  func(e *env, c *http.Client) *http.Response
	}{
		{"the person declines at GitHub", signup.ErrGitHubDenied, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			e.gh.DenyNext()
			resp, _ := e.do(c, "GET", e.atGitHub(e.begin(c, "/cb/", "")), "")
			return resp
		}},
		{"GitHub answers another error", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			back := mustURL(e.atGitHub(e.begin(c, "/cb/", "")))
			q := url.Values{"state": {back.Query().Get("state")}, "error": {"application_suspended"}}
			resp, _ := e.do(c, "GET", e.url+signup.CallbackPath+"?"+q.Encode(), "")
			return resp
		}},
		{"a bad code (bad_verification_code)", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			back := mustURL(e.atGitHub(e.begin(c, "/cb/", "")))
			q := back.Query()
			q.Set("code", "0123456789abcdef0123")
			back.RawQuery = q.Encode()
			resp, _ := e.do(c, "GET", back.String(), "")
			if e.gh.Calls("POST /login/oauth/access_token") != 1 || !strings.Contains(e.log.String(), "bad_verification_code") {
				e.t.Errorf("the code was not refused by GitHub as bad_verification_code:\n%s", e.log.String())
			}
			return resp
		}},
		{"no code", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			back := mustURL(e.atGitHub(e.begin(c, "/cb/", "")))
			q := back.Query()
			q.Del("code")
			back.RawQuery = q.Encode()
			resp, _ := e.do(c, "GET", back.String(), "")
			return resp
		}},
		{"GitHub's primary rate limit (403)", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			e.gh.RateLimit(http.StatusForbidden)
			resp, _ := e.do(c, "GET", e.atGitHub(e.begin(c, "/cb/", "")), "")
			if !strings.Contains(e.log.String(), "rate_limited=true") {
				e.t.Errorf("the rate limit is not told in the log:\n%s", e.log.String())
			}
			return resp
		}},
		{"GitHub's secondary rate limit (429)", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			e.gh.RateLimit(http.StatusTooManyRequests)
			resp, _ := e.do(c, "GET", e.atGitHub(e.begin(c, "/cb/", "")), "")
			if !strings.Contains(e.log.String(), "rate_limited=true") {
				e.t.Errorf("the rate limit is not told in the log:\n%s", e.log.String())
			}
			return resp
		}},
		{"a known identity of a disabled user", signup.ErrDisabled, func(e *env, c *http.Client) *http.Response {
			if _, err := e.users.SetDisabled(context.Background(), "alice", true); err != nil {
				e.t.Fatal(err)
			}
			resp, _ := e.signInWithGitHub(c, known, "/cb/", "")
			return resp
		}},
		{"an unknown identity with signup off", signup.ErrSignupClosed, func(e *env, c *http.Client) *http.Response {
			resp, _ := e.signInWithGitHub(c, githubtest.Verified(3003, "carol", "carol@example.com"), "/cb/", "")
			return resp
		}},
		{"an unknown identity with an unverified primary email, signup on", signup.ErrEmailUnverified, func(e *env, c *http.Client) *http.Response {
			e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = 10")
			resp, _ := e.signInWithGitHub(c, githubtest.Account{ID: 3003, Login: "carol", Emails: []githubtest.Email{
				{Email: "carol@example.com", Primary: true, Verified: false}, {Email: "c2@example.com", Verified: true}}}, "/cb/", "")
			if n := e.count("SELECT count(*) FROM signup_queue"); n != 0 {
				e.t.Errorf("an unverified person joined signup's queue (%d entries)", n)
			}
			return resp
		}},
		{"an unknown identity whose email is a user's: an email never links", signup.ErrSignupClosed, func(e *env, c *http.Client) *http.Response {
			e.db.Pool.Exec(context.Background(), "UPDATE identities SET email = 'alice@example.com', email_verified = true")
			resp, _ := e.signInWithGitHub(c, githubtest.Verified(3003, "alice", "alice@example.com"), "/cb/", "")
			return resp
		}},
		{"signup refuses (its code passes through)", signup.ErrInviteRequired, func(e *env, c *http.Client) *http.Response {
			e.exec("UPDATE signup_settings SET enabled = true, invite_only = true, seats = 10")
			resp, _ := e.signInWithGitHub(c, githubtest.Verified(3003, "carol", "carol@example.com"), "/cb/", "")
			return resp
		}},
		{"signup fails", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			// The queue's table gone: signup's Arrive fails on the database.
			e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = 10")
			e.exec("ALTER TABLE signup_queue RENAME TO signup_queue_gone")
			resp, _ := e.signInWithGitHub(c, githubtest.Verified(3003, "carol", "carol@example.com"), "/cb/", "")
			return resp
		}},
		{"signup admits a user disabled meanwhile", signup.ErrDisabled, func(e *env, c *http.Client) *http.Response {
			// Signup admits carol at once (a free seat); the trigger
			// disables her account as it is made, as an admin would
			// between the admission and the session.
			e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = 10")
			e.exec(`CREATE FUNCTION disable_new_user() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN NEW.disabled_at := now(); RETURN NEW; END $$`)
			e.exec("CREATE TRIGGER disable_new_user BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION disable_new_user()")
			resp, _ := e.signInWithGitHub(c, githubtest.Verified(3003, "carol", "carol@example.com"), "/cb/", "")
			return resp
		}},
		{"a flow past its 10 minutes", signup.ErrFailed, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			back := e.atGitHub(e.begin(c, "/cb/", ""))
			e.db.Pool.Exec(context.Background(), "UPDATE github_login_flows SET expires_at = now() - interval '1 second'")
			resp, _ := e.do(c, "GET", back, "")
			return resp
		}},
		{"no cb_login cookie", signup.ErrBrowser, func(e *env, c *http.Client) *http.Response {
			e.gh.SignInAs(known)
			back := e.atGitHub(e.begin(c, "/cb/", ""))
			resp, _ := e.do(e.browser(), "GET", back, "")
			return resp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.link("1001", e.alice.ID)
			c := e.browser()
			resp := tc.run(e, c)
			if code := loginError(t, resp); code != tc.code {
				t.Fatalf("%d %v, login_error %q; want %q", resp.StatusCode, resp.Header, code, tc.code)
			}
			if n := e.count("SELECT count(*) FROM console_sessions"); n != 0 || e.me(c) != "" {
				t.Fatalf("a session was started")
			}
			if e.gh.Live() != 0 {
				t.Fatalf("%d GitHub tokens left live", e.gh.Live())
			}
		})
	}
}

// Begin and the callback each allow 20 calls per client address in 15
// minutes: the 21st begin is 429 too_many, the 21st callback
// login_error=too_many; neither stores or takes a flow.
func TestTwentyCallsPerAddressOnBeginAndOnTheCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.browser()
	body := `{"return_to":"/cb/"}`
	for i := range signup.LimitPerAddress {
		if resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", body); resp.StatusCode != 200 {
			t.Fatalf("begin %d: %d %s", i+1, resp.StatusCode, text)
		}
	}
	resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", body)
	var ans struct{ Error string }
	json.Unmarshal([]byte(text), &ans)
	if resp.StatusCode != 429 || ans.Error != signup.ErrTooMany || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("begin 21: %d %s", resp.StatusCode, text)
	}
	if n := e.count("SELECT count(*) FROM github_login_flows"); n != signup.LimitPerAddress {
		t.Fatalf("%d flows stored, want %d", n, signup.LimitPerAddress)
	}
	for i := range signup.LimitPerAddress {
		resp, _ := e.do(c, "GET", signup.CallbackPath+"?state=x&code=y", "")
		if code := loginError(t, resp); code != signup.ErrBrowser {
			t.Fatalf("callback %d: login_error %q, want browser", i+1, code)
		}
	}
	resp, _ = e.do(c, "GET", signup.CallbackPath+"?state=x&code=y", "")
	if code := loginError(t, resp); code != signup.ErrTooMany {
		t.Fatalf("callback 21: login_error %q, want too_many", code)
	}
}

// Bad input: a return_to that is not a console path is refused by begin
// (400) before anything is stored; an invite that is not cbi_ + 64 hex too.
func TestBeginRefusesABadReturnToAndAMalformedInvite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.browser()
	for _, bad := range []string{"https://evil.example/cb/", "//evil.example/cb/", "/cb/../x", "/cb/%2e%2e/x", "/cb/./x", "/cb//evil",
		"/x", "/cb", "\\\\evil", "/cb/\\evil", "javascript:alert(1)", "/cb/\nx", "http:/cb/", "/cb/" + strings.Repeat("a", 5000)} {
		body, _ := json.Marshal(map[string]string{"return_to": bad})
		resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", string(body))
		if resp.StatusCode != 400 || !strings.Contains(text, "bad_return_to") || cookie(resp, signup.LoginCookie) != nil {
			t.Errorf("return_to %q: %d %s; want 400 bad_return_to", bad, resp.StatusCode, text)
		}
	}
	for _, bad := range []string{"cbi_", "cbi_" + strings.Repeat("A", 64), "cbi_" + strings.Repeat("a", 63), "cbit_" + strings.Repeat("a", 64), strings.Repeat("a", 68)} {
		body, _ := json.Marshal(map[string]string{"return_to": "/cb/", "invite": bad})
		if resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", string(body)); resp.StatusCode != 400 || !strings.Contains(text, "bad_invite") {
			t.Errorf("invite %q: %d %s; want 400 bad_invite", bad, resp.StatusCode, text)
		}
	}
	if n := e.count("SELECT count(*) FROM github_login_flows"); n != 0 {
		t.Fatalf("%d flows stored for bad requests", n)
	}
	if resp, err := c.Post(e.url+"/cb/api/auth/github/begin", "application/x-www-form-urlencoded", strings.NewReader("return_to=/cb/")); err != nil || resp.StatusCode != 415 {
		t.Errorf("a form: %v %v; want 415", resp, err)
	}
	for _, good := range []string{"/cb/", "/cb/token", "/cb/oauth/authorize?client_id=cocoonbox-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback&state=s", "/cb/queue"} {
		body, _ := json.Marshal(map[string]string{"return_to": good})
		if resp, text := e.do(c, "POST", "/cb/api/auth/github/begin", string(body)); resp.StatusCode != 200 {
			t.Errorf("return_to %q: %d %s; want 200", good, resp.StatusCode, text)
		}
	}
}

// An unknown identity goes to signup's Arrive with the GitHub account's
// numeric id, login, primary email and the invite begin carried; a queue
// entry sets the Strict cb_queue cookie and goes to /cb/queue, and once
// admitted the same identity signs in as its new user.
func TestAnUnknownIdentityIsHandedToSignup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec("UPDATE signup_settings SET enabled = true, invite_only = true, seats = 0")
	inv, err := e.signup.CreateInvite(context.Background(), "", "", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := e.browser()
	resp, text := e.signInWithGitHub(c, githubtest.Verified(3003, "Carol", "carol@example.com"), "/cb/", inv.Code)
	if onward(resp, text) != "/cb/queue" {
		t.Fatalf("queued: %d %s; want the page going to /cb/queue", resp.StatusCode, text)
	}
	var id, idp, subject, login, email string
	var verified bool
	var invite *string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT id, idp, subject, login, email, email_verified, invite::text FROM signup_queue`).
		Scan(&id, &idp, &subject, &login, &email, &verified, &invite); err != nil {
		t.Fatalf("the queue entry: %v", err)
	}
	if idp != "github" || subject != "3003" || login != "Carol" || email != "carol@example.com" || !verified || invite == nil || *invite != inv.ID {
		t.Fatalf("queued %s %s %s %s verified %v invite %v; want github 3003 Carol carol@example.com, verified, the invite %s", idp, subject, login, email, verified, invite, inv.ID)
	}
	q := cookie(resp, signup.QueueCookie)
	if q == nil || !strings.HasPrefix(q.Value, signup.QueueSecretPrefix) || q.SameSite != http.SameSiteStrictMode || q.Path != "/cb/" || !q.HttpOnly || q.MaxAge != 90*24*3600 {
		t.Fatalf("cb_queue %+v", q)
	}
	if n := e.count("SELECT count(*) FROM signup_queue_cookies WHERE queue_id = $1 AND sha256 = sha256(convert_to($2, 'UTF8'))", id, q.Value); n != 1 {
		t.Fatalf("cb_queue %q is not the queue entry's secret", q.Value)
	}
	e.exec("UPDATE signup_settings SET seats = 10")
	if _, err := e.signup.Admit(context.Background()); err != nil {
		t.Fatal(err)
	}
	c = e.browser()
	resp, text = e.signInWithGitHub(c, githubtest.Verified(3003, "Carol", "carol@example.com"), "/cb/token", "")
	if onward(resp, text) != "/cb/token" || e.me(c) == "" || e.me(c) == "alice" || e.me(c) == "bob" {
		t.Fatalf("admitted: %d %s, signed in as %q", resp.StatusCode, text, e.me(c))
	}
}

// GitHub sign-in not configured: providers says so, begin is 404.
func TestProviders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.browser()
	get := func(e *env) signup.Providers {
		resp, text := e.do(c, "GET", "/cb/api/auth/providers", "")
		var p signup.Providers
		if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &p) != nil {
			t.Fatalf("providers: %d %s", resp.StatusCode, text)
		}
		return p
	}
	if p := get(e); p != (signup.Providers{GitHub: true, Signup: false, InviteOnly: true}) {
		t.Errorf("defaults: %+v", p)
	}
	e.db.Pool.Exec(context.Background(), "UPDATE signup_settings SET enabled = true, invite_only = false")
	if p := get(e); p != (signup.Providers{GitHub: true, Signup: true, InviteOnly: false}) {
		t.Errorf("signup on: %+v", p)
	}
	off := newEnvWith(t, false)
	if p := get(off); p.GitHub || p.Signup {
		t.Errorf("not configured: %+v", p)
	}
	if resp, text := off.do(c, "POST", "/cb/api/auth/github/begin", `{"return_to":"/cb/"}`); resp.StatusCode != 404 {
		t.Errorf("begin not configured: %d %s", resp.StatusCode, text)
	}
	// The sign-in page offers GitHub only when configured.
	if _, page := e.do(c, "GET", "/cb/", ""); !strings.Contains(page, "Sign in with GitHub") || !strings.Contains(page, `id="password"`) {
		t.Error("the configured sign-in page does not offer GitHub beside the password form")
	}
	if _, page := off.do(c, "GET", "/cb/", ""); strings.Contains(page, "Sign in with GitHub") || !strings.Contains(page, `id="password"`) {
		t.Error("the unconfigured sign-in page offers GitHub, or lost the password form")
	}
}

// With signup's real Arrive behind the callback: a new person with a free
// seat is admitted and signed in at once as an account made through GitHub
// (its user name cleaned from the login; a login that cleans to nothing or
// to a reserved name gets signup's fallback), and without a free seat
// waits in the queue with the cb_queue cookie.
func TestANewPersonThroughGitHubIsAdmittedOrQueued(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, "UPDATE signup_settings SET enabled = true, invite_only = false, seats = 5"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    int64
		login string
		want  string
	}{
		{7007, "Mona.Lisa", "mona-lisa"},
		{7008, "Admin", "gh-7008"},
		{7009, "___", "gh-7009"},
	} {
		c := e.browser()
		resp, text := e.signInWithGitHub(c, githubtest.Verified(tc.id, tc.login, tc.login+"@example.com"), "/cb/token", "")
		if onward(resp, text) != "/cb/token" {
			t.Fatalf("%s: %d %s", tc.login, resp.StatusCode, text)
		}
		if who := e.me(c); who != tc.want {
			t.Errorf("GitHub login %q signed in as %q, want %q", tc.login, who, tc.want)
		}
		if n := e.count("SELECT count(*) FROM users u JOIN identities i ON i.user_id = u.id WHERE u.name = $1 AND u.idp = 'github' AND u.password_hash IS NULL AND i.subject = $2",
			tc.want, strconv.FormatInt(tc.id, 10)); n != 1 {
			t.Errorf("%s: no account made through GitHub with its identity", tc.want)
		}
	}
	// Five seats, five non-admin accounts now (alice, bob and three): the next waits.
	c := e.browser()
	resp, text := e.signInWithGitHub(c, githubtest.Verified(7010, "late", "late@example.com"), "/cb/", "")
	if onward(resp, text) != "/cb/queue" || e.me(c) != "" {
		t.Fatalf("no seat: %d %s; want the queue", resp.StatusCode, text)
	}
	q := cookie(resp, signup.QueueCookie)
	if q == nil || q.SameSite != http.SameSiteStrictMode || q.Path != "/cb/" || !q.HttpOnly || q.MaxAge != 90*24*3600 {
		t.Fatalf("cb_queue %+v", q)
	}
	if n := e.count(`SELECT count(*) FROM signup_queue q JOIN signup_queue_cookies c ON c.queue_id = q.id
		WHERE c.sha256 = sha256($1::bytea) AND q.status = 'waiting' AND q.subject = '7010'`, []byte(q.Value)); n != 1 {
		t.Fatal("the cookie is not a secret of the waiting entry's")
	}
}
