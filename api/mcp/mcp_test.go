package mcp_test

import (
	"context"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// older and latest are the images the test supervisor boots: latest is
// what a box made without an image runs, and what an upgrade moves to.
const (
	older  = "cbdesk:v22-base"
	latest = "cbdesk:v23-base"
)

// env is the api as the binary builds it (apitest.New: apiserver.New on a
// fresh database, OAuth for agents off) with the supervisor in memory
// (sandboxtest) under its boxes, users alice and bob with personal tokens
// and room for a few boxes each; the control MCP is the api's.
type env struct {
	t          testing.TB
	api        *apitest.API
	sup        *sandboxtest.Supervisor
	base, url  string // the api's URL, the MCP's
	alice, bob users.User
	aliceToken tokens.Secret
	bobToken   tokens.Secret
}

func newEnv(t testing.TB, opts ...apitest.Option) *env {
	t.Helper()
	sup := sandboxtest.New(older, latest)
	a := apitest.New(t, append([]apitest.Option{apitest.WithoutOAuth(), apitest.WithoutSession(), apitest.WithSupervisor("host1", sup)}, opts...)...)
	e := &env{t: t, api: a, sup: sup, base: a.URL, url: a.URL + client.MCPPath, alice: a.User}
	e.bob = a.AddUser("bob", false)
	e.aliceToken, e.bobToken = a.PersonalToken(e.alice.ID), a.PersonalToken(e.bob.ID)
	if _, err := a.DB.Pool.Exec(context.Background(), "UPDATE users SET max_boxes = 4, max_running = 4"); err != nil {
		t.Fatal(err)
	}
	return e
}

// connect is a go-sdk client of the MCP with token.
func (e *env) connect(token tokens.Secret) *mcptest.Client {
	return mcptest.Connect(e.t, e.url, string(token))
}

// boxes is the api's Boxes service.
func (e *env) boxes() *boxes.Service {
	e.t.Helper()
	svc, err := e.api.Boxes.Service()
	if err != nil {
		e.t.Fatalf("the api has no Boxes service: %v", err)
	}
	return svc
}

// boxCount is how many boxes user has, by the api's rows.
func (e *env) boxCount(user users.User) int {
	e.t.Helper()
	var n int
	if err := e.api.DB.Pool.QueryRow(context.Background(), "SELECT count(*) FROM boxes WHERE user_id = $1", user.ID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// only is the id of the one operation the user's boxes have had.
func (e *env) only(t *testing.T, user users.User) string {
	t.Helper()
	var ids []string
	rows, err := e.api.DB.Pool.Query(context.Background(), "SELECT id FROM box_operations WHERE user_id = $1", user.ID)
	if err == nil {
		for rows.Next() {
			var id string
			if err = rows.Scan(&id); err != nil {
				break
			}
			ids = append(ids, id)
		}
		rows.Close()
	}
	if err != nil || len(ids) != 1 {
		t.Fatalf("operations of %s: %v %v, want one", user.Name, ids, err)
	}
	return ids[0]
}

// putFile writes n bytes at path in the running box id, so a save of it
// holds them.
func (e *env) putFile(id, path string, n int) {
	e.t.Helper()
	if err := e.sup.PutFile(context.Background(), id, sandbox.File{Path: path, Data: make([]byte, n)}); err != nil {
		e.t.Fatal(err)
	}
}
