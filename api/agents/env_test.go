package agents

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const password = "correct horse"

// env is the console, OAuth for agents and the Agents page as the api
// wires them, in process on a fresh database, users alice and bob.
type env struct {
	t          *testing.T
	url        string
	db         *dbtest.DB
	grants     *oauth.Grants
	alice, bob users.User
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t, users.Schema, console.Schema, ratelimit.Schema, boxes.Schema, oauth.Schema)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	us := users.NewStore(db.Pool)
	us.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	ix := tokens.NewIndex(db.Pool, db.URL, log)
	if err := ix.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Stop)
	con := console.New(console.Deps{Pool: db.Pool, Users: us, Tokens: tokens.NewStore(db.Pool, ix), Log: log,
		SignIn: console.SignInLimits{PerUser: 100, PerAddress: 100, Window: 60e9}})
	srv := server.New(log, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e := &env{t: t, url: ts.URL, db: db}

	con.Mount(srv)
	fetcher, ferr := oauth.NewFetcher(oauth.FetcherConfig{})
	if ferr != nil {
		t.Fatal(ferr)
	}
	t.Cleanup(fetcher.Close)
	clients := oauth.NewClients(db.Pool, fetcher)
	oauth.NewRegistration(clients, log).Mount(srv)
	e.grants = oauth.NewGrants(db.Pool, db.URL, log)
	if err := e.grants.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.grants.Stop)
	authz := oauth.NewAgents(ts.URL, clients, e.grants, func(r *http.Request) (oauth.User, bool) {
		u, ok := con.Session(r)
		return oauth.User{ID: u.ID, Name: u.Name}, ok
	}, log)
	for _, p := range []string{"POST /cb/api/oauth/approve", "POST " + oauth.TokenPath} {
		srv.Handle(p, authz)
	}
	// As api/cmd/cocoonbox-api wires it.
	pages := NewConsole(NewStore(db.Pool, e.grants), func(r *http.Request) (string, bool) {
		u, ok := con.Session(r)
		return u.ID, ok
	}, log)
	pages.Mount(srv)
	con.AddSection(console.Section{Title: "Agents", Path: "/cb/agents", Notice: pages.Notice, Blurb: "The agents you allowed."})

	var err error
	if e.alice, err = us.Add(ctx, "alice", password, false); err != nil {
		t.Fatal(err)
	}
	if e.bob, err = us.Add(ctx, "bob", password, false); err != nil {
		t.Fatal(err)
	}
	return e
}

// session is a console session of name: a cookie-keeping client that does
// not follow redirects.
type session struct {
	e *env
	c *http.Client
}

func (e *env) signIn(name string) *session {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{e: e, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if code, body := s.do("POST", "/cb/api/session", "application/json", fmt.Sprintf(`{"user": %q, "password": %q}`, name, password)); code != 200 {
		e.t.Fatalf("sign %s in: %d %s", name, code, body)
	}
	return s
}

// do sends a request on the session; its status and body.
func (s *session) do(method, path, ctype, body string) (int, string) {
	s.e.t.Helper()
	req, err := http.NewRequest(method, s.e.url+path, strings.NewReader(body))
	if err != nil {
		s.e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		s.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// agents is GET /cb/api/agents on the session.
func (s *session) agents() []Agent {
	s.e.t.Helper()
	code, body := s.do("GET", "/cb/api/agents", "", "")
	var list []Agent
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
		s.e.t.Fatalf("GET /cb/api/agents: %d %s", code, body)
	}
	return list
}

// grant signs an agent in as an MCP client would, approved on the
// session with the caps: a registered client named name, the approve
// call, the token endpoint. It answers the access token and its grant.
func (s *session) grant(name string, maxBoxes, maxRunning int) (string, *oauth.Grant) {
	t := s.e.t
	t.Helper()
	const redirect = "http://127.0.0.1:9/cb"
	resp, err := http.Post(s.e.url+oauth.RegistrationPath, "application/json",
		strings.NewReader(fmt.Sprintf(`{"client_name": %q, "redirect_uris": [%q]}`, name, redirect)))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {reg.ClientID}, "redirect_uri": {redirect}, "state": {"s"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}, "scope": {"boxes"}}
	body, _ := json.Marshal(map[string]any{"query": q.Encode(), "max_boxes": maxBoxes, "max_running": maxRunning, "days": 7})
	code, answer := s.do("POST", "/cb/api/oauth/approve", "application/json", string(body))
	var a struct{ Redirect string }
	if code != 200 || json.Unmarshal([]byte(answer), &a) != nil {
		t.Fatalf("approve %s: %d %s", name, code, answer)
	}
	cb, _ := url.Parse(a.Redirect)
	resp, err = http.PostForm(s.e.url+oauth.TokenPath, url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")},
		"client_id": {reg.ClientID}, "redirect_uri": {redirect}, "code_verifier": {verifier}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(raw, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token for %s: %d %s", name, resp.StatusCode, raw)
	}
	g, err := s.e.grants.Check(tok.AccessToken)
	if err != nil {
		t.Fatalf("the new token of %s: %v", name, err)
	}
	return tok.AccessToken, g
}

// box inserts a box of userID in state, created by grant ("" for the
// user's own), as the Boxes service would have.
func (e *env) box(userID, name, state, grant string) string {
	e.t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	id := "cb-" + hex.EncodeToString(b)
	ctx := context.Background()
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed, agent)
 VALUES ($1, $2, $3, 'cbdesk:v23-base', $4, 'local', $5, $6)`, id, userID, name, state, bytes.Repeat([]byte{1}, 32), grant != ""); err != nil {
		e.t.Fatal(err)
	}
	if grant != "" {
		if _, err := e.db.Pool.Exec(ctx, `INSERT INTO oauth_boxes (box_id, grant_id) VALUES ($1, $2)`, id, grant); err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}
