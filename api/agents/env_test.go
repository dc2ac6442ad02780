package agents_test

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
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/agents"
	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const password = apitest.Password

// env is the api (apitest.New: the console, OAuth for agents and the
// Agents page as apiserver wires them) on a fresh database, users alice
// and bob.
type env struct {
	t          *testing.T
	api        *apitest.API
	url        string
	db         *database.DB
	grants     *oauth.Grants
	alice, bob users.User
}

func newEnv(t *testing.T) *env {
	t.Helper()
	a := apitest.New(t)
	return &env{t: t, api: a, url: a.URL, db: a.DB, grants: a.Grants, alice: a.User, bob: a.AddUser("bob", false)}
}

// session is a console session of name (apitest's browser).
type session struct {
	e *env
	b *apitest.Browser
}

func (e *env) signIn(name string) *session {
	e.t.Helper()
	return &session{e: e, b: e.api.SignIn(name)}
}

// do sends a request on the session; its status and body.
func (s *session) do(method, path, ctype, body string) (int, string) {
	s.e.t.Helper()
	resp, text := s.b.Send(method, path, ctype, body)
	return resp.StatusCode, text
}

// agents is GET /cb/api/agents on the session.
func (s *session) agents() []agents.Agent {
	s.e.t.Helper()
	code, body := s.do("GET", "/cb/api/agents", "", "")
	var list []agents.Agent
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
