package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is the api (apitest.New) with alice and bob signed out, its
// console's sign-in limits and clock the test's.
type env struct {
	t       *testing.T
	url     string
	db      *database.DB
	users   *users.Store
	index   *tokens.Index
	console *console.Console
	// clock is the sign-in limits' time in Unix nanoseconds, moved by the test.
	clock *atomic.Int64
}

// roomy are limits no test but the limits' own reaches.
var roomy = console.SignInLimits{PerUser: 100, PerAddress: 100, Window: time.Minute}

func newEnv(t *testing.T, secure bool) *env { return newLimitedEnv(t, secure, roomy) }

// newLimitedEnv is an api whose console has limits (console.sign_in, and
// trusted_proxies from limits.TrustedProxies) and, when secure, an https
// public_url (its cookies Secure).
func newLimitedEnv(t *testing.T, secure bool, limits console.SignInLimits) *env {
	t.Helper()
	clock := new(atomic.Int64)
	clock.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithClock(func() time.Time { return time.Unix(0, clock.Load()) }),
		apitest.WithConfig(func(c *config.Config) {
			c.Console.SignIn = config.SignIn{PerUser: limits.PerUser, PerAddress: limits.PerAddress, Window: limits.Window}
			c.TrustedProxies = nil
			for _, p := range limits.TrustedProxies {
				c.TrustedProxies = append(c.TrustedProxies, p.String())
			}
			if secure {
				c.PublicURL = "https://" + c.Listen
			}
		}))
	a.AddUser("bob", false)
	return &env{t: t, url: a.URL, db: a.DB, users: a.Users, index: a.Index, console: a.Server.Console, clock: clock}
}

// browser is a cookie-keeping client that does not follow redirects.
func (e *env) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) do(c *http.Client, method, path, ctype, body string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) signIn(c *http.Client, user, password string) (*http.Response, string) {
	b, _ := json.Marshal(map[string]string{"user": user, "password": password})
	return e.do(c, "POST", "/cb/api/session", "application/json", string(b))
}

func TestSignInSetsTheSessionCookie(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		e := newEnv(t, secure)
		resp, body := e.signIn(e.browser(), "alice", "correct horse")
		if resp.StatusCode != 200 || !strings.Contains(body, `"name":"alice"`) {
			t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
		}
		cookies := resp.Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies %v", cookies)
		}
		ck := cookies[0]
		if ck.Name != "cb_session" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/cb/" || ck.Secure != secure || ck.MaxAge <= 0 {
			t.Fatalf("secure=%v: cookie %+v; want HttpOnly, SameSite=Strict, Path=/cb/, Secure only over https", secure, ck)
		}
		var stored int
		e.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM console_sessions WHERE sha256 = sha256($1::bytea)", []byte(ck.Value)).Scan(&stored)
		if stored != 1 {
			t.Fatalf("the session is not stored by its SHA-256 (%d rows)", stored)
		}
	}
}

func TestBadSignInsAreRefusedAndSetNoCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	if _, err := e.users.SetDisabled(context.Background(), "bob", true); err != nil {
		t.Fatal(err)
	}
	c := e.browser()
	cases := []struct {
		ctype, body string
		code        int
		want        string
	}{
		{"application/json", `{"user":"alice","password":"wrong horse"}`, 401, "wrong user name or password"},
		{"application/json", `{"user":"carol","password":"correct horse"}`, 401, "wrong user name or password"},
		{"application/json", `{"user":"bob","password":"correct horse"}`, 403, "disabled"},
		{"application/json", `{"user":"alice"}`, 400, "give both"},
		{"application/json", `{"user":"alice","password":"correct horse","admin":true}`, 400, "unknown field"},
		{"application/json", `not json`, 400, "not the call's JSON object"},
		{"application/x-www-form-urlencoded", `user=alice&password=correct+horse`, 415, "application/json"},
		{"", `{"user":"alice","password":"correct horse"}`, 415, "application/json"},
	}
	for _, k := range cases {
		resp, body := e.do(c, "POST", "/cb/api/session", k.ctype, k.body)
		if resp.StatusCode != k.code || !strings.Contains(body, k.want) || len(resp.Cookies()) != 0 {
			t.Errorf("%s %s: %d %s (cookies %v); want %d naming %q and no cookie", k.ctype, k.body, resp.StatusCode, body, resp.Cookies(), k.code, k.want)
		}
	}
	var n int
	e.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM console_sessions").Scan(&n)
	if n != 0 {
		t.Fatalf("refused sign-ins stored %d sessions", n)
	}
}

func TestSessionEndsWithSignOutDisableAndEndSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	me := func(c *http.Client) int {
		resp, _ := e.do(c, "GET", "/cb/api/me", "", "")
		return resp.StatusCode
	}
	a1, a2, b := e.browser(), e.browser(), e.browser()
	e.signIn(a1, "alice", "correct horse")
	e.signIn(a2, "alice", "correct horse")
	e.signIn(b, "bob", "correct horse")
	if me(a1) != 200 || me(a2) != 200 || me(b) != 200 {
		t.Fatal("signed-in sessions are refused")
	}
	if me(e.browser()) != 401 {
		t.Fatal("no cookie is accepted")
	}
	// Sign-out ends that session only, and clears the cookie.
	resp, _ := e.do(a1, "DELETE", "/cb/api/session", "", "")
	if resp.StatusCode != 204 || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("sign-out: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if me(a1) != 401 || me(a2) != 200 {
		t.Fatalf("after sign-out: a1 %d a2 %d", me(a1), me(a2))
	}
	// EndSessions (sign out everywhere) ends every session of alice, not bob's.
	alice, _ := e.users.ByName(context.Background(), "alice")
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error { return e.console.EndSessions(ctx, tx, alice.ID) }); err != nil {
		t.Fatal(err)
	}
	if me(a2) != 401 || me(b) != 200 {
		t.Fatalf("after EndSessions(alice): alice %d bob %d", me(a2), me(b))
	}
	// A disabled account's session stops working.
	if _, err := e.users.SetDisabled(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	if me(b) != 401 {
		t.Fatal("a disabled account's session still works")
	}
}

// An expired session is refused, and the user's next sign-in removes it.
func TestExpiredSessionIsRefusedAndRemovedAtTheNextSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	c := e.browser()
	e.signIn(c, "alice", "correct horse")
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, "UPDATE console_sessions SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := e.do(c, "GET", "/cb/api/me", "", ""); resp.StatusCode != 401 {
		t.Fatalf("an expired session: %d", resp.StatusCode)
	}
	e.signIn(e.browser(), "alice", "correct horse")
	var expired, live int
	e.db.Pool.QueryRow(ctx, "SELECT count(*) FILTER (WHERE expires_at <= now()), count(*) FILTER (WHERE expires_at > now()) FROM console_sessions").Scan(&expired, &live)
	if expired != 0 || live != 1 {
		t.Fatalf("after the next sign-in: %d expired, %d live sessions; want 0 and 1", expired, live)
	}
}

// The personal token's calls; a regenerate without a JSON body is
// refused (the same-site page that replaced the token).
func TestPersonalTokenCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	c := e.browser()
	if resp, _ := e.do(c, "POST", "/cb/api/me/token", "application/json", "{}"); resp.StatusCode != 401 {
		t.Fatalf("without a session: %d", resp.StatusCode)
	}
	e.signIn(c, "alice", "correct horse")
	resp, body := e.do(c, "POST", "/cb/api/me/token", "application/json", "{}")
	var made struct{ Token string }
	json.Unmarshal([]byte(body), &made)
	if resp.StatusCode != 200 || len(made.Token) != tokens.Len {
		t.Fatalf("make: %d %s", resp.StatusCode, body)
	}
	if p, err := e.index.Check(made.Token); err != nil || p.UserName != "alice" {
		t.Fatalf("the made token: %v, %v", p, err)
	}
	if _, body := e.do(c, "GET", "/cb/api/me/token", "", ""); !strings.Contains(body, `"exists":true`) || strings.Contains(body, made.Token[3:]) {
		t.Fatalf("info: %s (must say it exists and never show it)", body)
	}
	// An empty body not sent as JSON (a field-less form of another port
	// of this host, or a no-cors fetch) is refused, and the token stays.
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain"} {
		if resp, body := e.do(c, "POST", "/cb/api/me/token", ct, ""); resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("an empty body as %q: %d %s; want 415", ct, resp.StatusCode, body)
		}
	}
	if _, err := e.index.Check(made.Token); err != nil {
		t.Fatalf("a refused regenerate replaced the token: %v", err)
	}
	_, body = e.do(c, "POST", "/cb/api/me/token", "application/json", "")
	var second struct{ Token string }
	json.Unmarshal([]byte(body), &second)
	if _, err := e.index.Check(made.Token); err == nil || second.Token == made.Token {
		t.Fatal("regenerating left the old token working")
	}
	for range 2 { // 204 also when there is none
		if resp, _ := e.do(c, "DELETE", "/cb/api/me/token", "", ""); resp.StatusCode != 204 {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
	}
	if _, err := e.index.Check(second.Token); err == nil {
		t.Fatal("the revoked token works")
	}
}

func TestPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	c := e.browser()
	resp, body := e.do(c, "GET", "/cb/", "", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `id="signin-submit"`) || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("signed out /cb/: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do(c, "GET", "/cb/token", "", ""); resp.StatusCode != 303 || resp.Header.Get("Location") != "/cb/?return_to=/cb/token" {
		t.Fatalf("signed out /cb/token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The page's script reads return_to from the JSON of data-page.
	for q, want := range map[string]string{"/cb/token": "/cb/token", "https://evil.example/": "/cb/", "//evil.example/cb/": "/cb/"} {
		_, body := e.do(c, "GET", "/cb/?return_to="+q, "", "")
		if !strings.Contains(body, `data-page="{&#34;return_to&#34;:&#34;`+want+`&#34;}"`) {
			t.Errorf("return_to=%s: the form goes elsewhere than %s", q, want)
		}
	}
	e.signIn(c, "alice", "correct horse")
	_, body = e.do(c, "GET", "/cb/", "", "")
	for _, want := range []string{"Hello, alice", `href="/cb/token"`, `href="/cb/devices"`, `id="signout"`} {
		if !strings.Contains(body, want) {
			t.Errorf("signed-in home lacks %s", want)
		}
	}
	if resp, body := e.do(c, "GET", "/cb/token", "", ""); resp.StatusCode != 200 || !strings.Contains(body, `id="token-generate"`) {
		t.Fatalf("token page: %d", resp.StatusCode)
	}
}
