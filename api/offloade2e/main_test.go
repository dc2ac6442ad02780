// Package offloade2e runs `cocoonbox offload` and `cocoonbox back` as a
// user does (issue 13; Contract: Offload, "Offload, Mac side" and "Back,
// Mac side"): the real cocoonbox CLI built here, in real repositories on
// this host, against the api's own Boxes and Session services on its
// listener (package server) with real PostgreSQL (dbtest) and a box the
// api created through the local supervisor; every Exec of the packer goes
// through `cocoonbox rsh` and Session.Exec, rsync's and git's included.
// The box runs the stand-in CLI (tests/offload/standin) as claude.
//
// The token check is a test interceptor mapping one token to the user:
// the real one (package tokens) is the e2e tests'. `cocoonbox-api serve`
// does not mount Boxes and Session yet; when it does, these tests move to
// api/e2e's real server process.
package offloade2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/api/users"
)

const (
	testRoot = "/var/tmp/cocoonbox-offloade2e-test"
	token    = "cb_0ff10ad000000000000000000000000000000000000000000000000000000000"
	// image is the ref the catalog names the test image by: the offload's
	// preflight blocks anything older than cbdesk:v22.
	image = "cbdesk:v22-base"
)

var (
	sup    *local.Supervisor
	cliBin string
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	img := os.Getenv("COCOONBOX_IMAGE")
	if os.Geteuid() != 0 || img == "" {
		fmt.Fprintln(os.Stderr, "api/offloade2e: needs root and COCOONBOX_IMAGE (a base image root; make box-test sets it)")
		return 1
	}
	defer os.RemoveAll(testRoot)
	images := filepath.Join(testRoot, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "api/offloade2e:", err)
		return 1
	}
	if err := os.Symlink(img, filepath.Join(images, "cbdesk-v22-base")); err != nil {
		fmt.Fprintln(os.Stderr, "api/offloade2e:", err)
		return 1
	}
	cliBin = filepath.Join(testRoot, "bin", "cocoonbox")
	if out, err := exec.Command("go", "build", "-o", cliBin, "../cmd/cocoonbox").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "api/offloade2e: build the CLI: %v: %s\n", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := local.DefaultNetwork()
	n.Bridge, n.Gateway = "cboffload0", netip.MustParsePrefix("10.206.0.1/16")
	var err error
	sup, err = local.New(ctx, local.Config{StateDir: filepath.Join(testRoot, "state"), Images: images,
		Network: n, EgressHosts: []string{"deb.debian.org"}, DefaultMaxClaims: 1000, Log: quiet()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "api/offloade2e:", err)
		return 1
	}
	defer sup.Close()
	old, _ := sup.List(ctx, "")
	for _, mm := range old {
		_ = sup.Delete(ctx, mm.ID)
	}
	return dbtest.Run(m)
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// api is one test's database, Boxes service and listener, a user and a
// running box of theirs.
type api struct {
	endpoint, userID string
	box              *boxes.Box
}

type userKey struct{}

// testToken is the token check of these tests: token is the user's.
type testToken struct{ userID string }

func (tt testToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Header().Get("Authorization") == "Bearer "+token {
			ctx = context.WithValue(ctx, userKey{}, tt.userID)
		}
		return next(ctx, req)
	}
}

func (testToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (tt testToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if conn.RequestHeader().Get("Authorization") == "Bearer "+token {
			ctx = context.WithValue(ctx, userKey{}, tt.userID)
		}
		return next(ctx, conn)
	}
}

func caller(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok
}

// newAPI serves Boxes and Session for one user and creates their box
// (name) through the service, waiting until it runs.
func newAPI(t testing.TB, name string) *api {
	t.Helper()
	db := dbtest.New(t, users.Schema, boxes.Schema)
	s, err := boxes.New(context.Background(), boxes.Config{Pool: db.Pool, URL: db.URL, Hosts: map[string]sandbox.Supervisor{"local": sup}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{}
	err = db.Pool.QueryRow(context.Background(), `INSERT INTO users (name, password_hash, max_boxes, max_running)
 VALUES ('offloader', 'unused', 2, 2) RETURNING id::text`).Scan(&a.userID)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(quiet(), nil)
	opt := connect.WithInterceptors(testToken{a.userID})
	srv.Handle(controlv1connect.NewBoxesHandler(boxes.NewHandler(s, caller, quiet()), opt))
	srv.Handle(session.New(s, caller, quiet()).Handler(opt))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	a.endpoint = "http://" + ln.Addr().String()

	b, op, err := s.Create(context.Background(), boxes.Call{UserID: a.userID, RequestID: "req-create-" + name}, boxes.CreateRequest{Name: name, Image: image})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer wcancel()
	last, err := s.WaitOperation(wctx, a.userID, op.ID, func(*controlv1.Operation) {})
	if err != nil || last.Phase != controlv1.Phase_PHASE_DONE {
		t.Fatalf("wait for the box: %v %v", last, err)
	}
	a.box = b
	t.Cleanup(func() {
		cancel()
		<-served
		s.Close()
		if err := sup.Delete(context.Background(), b.ID); err != nil {
			t.Errorf("delete machine %s: %v", b.ID, err)
		}
	})
	return a
}
