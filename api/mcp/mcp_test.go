package mcp

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is the control MCP on a real listener, the real token index on a
// fresh database with users alice and bob (personal tokens), and the
// boxes service in memory.
type env struct {
	t          testing.TB
	base, url  string // the listener's URL, the MCP's
	boxes      *fakeBoxes
	tokens     *tokens.Store
	pool       *pgxpool.Pool
	alice, bob users.User
	aliceToken tokens.Secret
	bobToken   tokens.Secret
}

func newEnv(t testing.TB, with ...func(*Deps)) *env {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := dbtest.New(t, users.Schema)
	us := users.NewStore(db.Pool)
	us.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	ix := tokens.NewIndex(db.Pool, db.URL, log)
	if err := ix.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Stop)
	e := &env{t: t, boxes: newFakeBoxes(), tokens: tokens.NewStore(db.Pool, ix), pool: db.Pool}
	e.alice, e.aliceToken = e.user("alice", us)
	e.bob, e.bobToken = e.user("bob", us)

	srv := server.New(log, nil)
	srv.Handle(controlv1connect.NewBoxesHandler(e.boxes, connect.WithInterceptors(ix.Interceptor())))
	d := Deps{Boxes: e.boxes, Follow: e.boxes.follow, Tokens: ix, Hosts: []string{"api.example.test"}, Log: log}
	for _, f := range with {
		f(&d)
	}
	New(d).Mount(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { srv.Serve(sctx, ln); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	e.base = "http://" + ln.Addr().String()
	e.url = e.base + client.MCPPath
	return e
}

func (e *env) user(name string, us *users.Store) (users.User, tokens.Secret) {
	u, err := us.Add(context.Background(), name, "correct horse", false)
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := e.tokens.Regenerate(context.Background(), u.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return u, tok
}

// connect is a go-sdk client of the MCP with token.
func (e *env) connect(token tokens.Secret) *mcptest.Client {
	return mcptest.Connect(e.t, e.url, string(token))
}
