package signup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// qenv is one api's signup on a fresh database, served with the console.
type qenv struct {
	t     *testing.T
	db    *dbtest.DB
	s     *Signup
	users *users.Store
	url   string
	ctx   context.Context
}

func newQueueEnv(t *testing.T) *qenv {
	t.Helper()
	db := dbtest.New(t, users.Schema, console.Schema, ratelimit.Schema, Schema)
	e := &qenv{t: t, db: db, ctx: context.Background()}
	e.users = users.NewStore(db.Pool)
	e.users.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	e.s, e.url = serve(t, db.Pool, db.URL, e.users)
	return e
}

// serve is an api on db: its signup and the console, behind the
// invite-scoped token guard, as cmd/cocoonbox-api wires them.
func serve(t *testing.T, pool *pgxpool.Pool, url string, us *users.Store) (*Signup, string) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ix := tokens.NewIndex(pool, url, log)
	con := console.New(console.Deps{Pool: pool, Users: us, Tokens: tokens.NewStore(pool, ix), Log: log,
		SignIn: console.SignInLimits{PerUser: 1000, PerAddress: 1000, Window: time.Minute}})
	s := New(Deps{Pool: pool, Log: log, Session: con.Session, ClearSession: con.ClearCookie,
		DeleteUser: us.Delete})
	srv := server.New(log, nil)
	con.Mount(srv)
	// As cmd/cocoonbox-api's addSignupSections.
	con.AddSection(console.Section{Title: "Your account", Path: "/cb/account", Blurb: "Delete your account."})
	con.AddSection(console.Section{Title: "Admin", Path: "/cb/admin", Blurb: "Signup and the queue.", AdminsOnly: true})
	s.Mount(srv)
	// The GitHub callback's part for a queued person, until its stand-in
	// runs here: the cb_queue cookie, then the queue page.
	srv.Handle("GET /test/queued/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.SetQueueCookie(w, r.PathValue("id"))
		http.Redirect(w, r, "/cb/queue", http.StatusSeeOther)
	}))
	srv.Wrap(s.GuardInviteTokens)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// exec runs SQL on the test's database.
func (e *qenv) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.db.Pool.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// open opens signup: enabled, not invite-only, seats and the brake given.
func (e *qenv) open(seats, hourly int) {
	e.t.Helper()
	e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = $1, hourly_accounts = $2", seats, hourly)
}

func (e *qenv) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *qenv) seatsUsed() int {
	return e.count("SELECT count(*) FROM users WHERE NOT admin AND disabled_at IS NULL")
}

// person is the arrival of GitHub account n.
func person(n int) Arrival {
	return Arrival{IdP: "github", Subject: fmt.Sprint(1000 + n), Login: fmt.Sprintf("Person%d", n),
		Email: fmt.Sprintf("p%d@example.com", n), EmailVerified: true}
}

func (e *qenv) arrive(a Arrival) Outcome {
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

// setQueueCookie gives c the cb_queue cookie of queue entry id, as the
// GitHub callback sets it through SetQueueCookie.
func setQueueCookie(t *testing.T, c *browser, s *Signup, id string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.SetQueueCookie(rec, id)
	u, _ := url.Parse(c.base + "/cb/")
	c.c.Jar.SetCookies(u, rec.Result().Cookies())
	ck := rec.Result().Cookies()[0]
	if ck.Name != QueueCookie || ck.SameSite != http.SameSiteStrictMode || !ck.HttpOnly || ck.MaxAge != 90*24*3600 || ck.Path != "/cb/" {
		t.Fatalf("the queue cookie: %+v", ck)
	}
}
