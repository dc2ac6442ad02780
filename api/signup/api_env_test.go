package signup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// qenv is the api as the product builds it (apitest.New) without a user,
// for the tests of signup's HTTP side: the console, signup behind its
// token check, the token index's changes triggering admission, Run going;
// with GitHub sign-in against gh when a test asks for it.
type qenv struct {
	*pathEnv
	s     *signup.Signup
	users *users.Store
	url   string
}

func newQueueEnv(t *testing.T, opts ...apitest.Option) *qenv {
	t.Helper()
	a := apitest.New(t, append([]apitest.Option{apitest.WithoutUser()}, opts...)...)
	return &qenv{pathEnv: &pathEnv{API: a, t: t, ctx: context.Background()}, s: a.Signup, users: a.Users, url: a.URL}
}

// newQueueEnvWithGitHub is newQueueEnv with GitHub sign-in on, against a
// stand-in of its own.
func newQueueEnvWithGitHub(t *testing.T) *qenv {
	gh := githubtest.New(t)
	e := newQueueEnv(t, apitest.WithGitHub(gh))
	e.gh = gh
	return e
}

// open opens signup: enabled, not invite-only, seats and the brake given.
func (e *qenv) open(seats, hourly int) {
	e.t.Helper()
	e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = $1, hourly_accounts = $2", seats, hourly)
}

// person is the arrival of GitHub account n.
func person(n int) signup.Arrival {
	return signup.Arrival{IdP: "github", Subject: fmt.Sprint(1000 + n), Login: fmt.Sprintf("Person%d", n),
		Email: fmt.Sprintf("p%d@example.com", n), EmailVerified: true}
}

// queued is the queue entry of GitHub account id.
func (e *qenv) queued(id int) string {
	e.t.Helper()
	var q string
	if err := e.DB.Pool.QueryRow(e.ctx, "SELECT id::text FROM signup_queue WHERE subject = $1", fmt.Sprint(id)).Scan(&q); err != nil {
		e.t.Fatalf("the queue entry of GitHub account %d: %v", id, err)
	}
	return q
}

func (e *qenv) arrive(a signup.Arrival) signup.Outcome {
	e.t.Helper()
	out, err := e.s.Arrive(e.ctx, a)
	if err != nil {
		e.t.Fatalf("Arrive(%s): %v", a.Login, err)
	}
	return out
}

// browser is a browser-like HTTP client with its own cookies.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	// bearer, when set, goes as Authorization: Bearer.
	bearer string
}

func (e *qenv) client() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, base: e.url, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a call (body JSON unless nil) and answers the status and body.
func (c *browser) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		if s, ok := body.(string); ok {
			b = []byte(s)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// want sends a call and fails unless it answers status; it decodes the
// answer into v when v is not nil.
func (c *browser) want(status int, method, path string, body, v any) []byte {
	c.t.Helper()
	got, out := c.do(method, path, body)
	if got != status {
		c.t.Fatalf("%s %s: %d %s; want %d", method, path, got, out, status)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, out)
		}
	}
	return out
}

// signIn makes an account (admin or not) and answers a client signed in as it.
func (e *qenv) signIn(name string, admin bool) (*browser, users.User) {
	e.t.Helper()
	u, err := e.users.Add(e.ctx, name, "correct horse", admin)
	if err != nil {
		e.t.Fatal(err)
	}
	c := e.client()
	c.want(200, "POST", "/cb/api/session", map[string]string{"user": name, "password": "correct horse"}, nil)
	return c, u
}

func contains(b []byte, subs ...string) bool {
	for _, s := range subs {
		if !strings.Contains(string(b), s) {
			return false
		}
	}
	return true
}

// setQueueCookie gives c the cb_queue cookie of secret (an Outcome's
// QueueSecret, or a forgery), as the GitHub callback sets it through
// SetQueueCookie.
func setQueueCookie(t *testing.T, c *browser, s *signup.Signup, secret string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.SetQueueCookie(rec, secret)
	u, _ := url.Parse(c.base + "/cb/")
	c.c.Jar.SetCookies(u, rec.Result().Cookies())
	ck := rec.Result().Cookies()[0]
	if ck.Name != signup.QueueCookie || ck.SameSite != http.SameSiteStrictMode || !ck.HttpOnly || ck.MaxAge != 90*24*3600 || ck.Path != "/cb/" {
		t.Fatalf("the queue cookie: %+v", ck)
	}
}
