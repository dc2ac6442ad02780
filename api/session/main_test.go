package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/session"
)

// These tests boot one real cbdesk box (the local supervisor, on a bridge
// of their own so they run beside the supervisor's tests), serve Session
// on the api's own listener (package server) with every clock shortened to
// half a second, and drive it with the real cocoonbox CLI built here and
// with a connect client. The box is shared by every test.
//
// The token check here is a map of two test tokens (alice's, bob's): the
// real one (package tokens) needs the database and is the e2e tests'.

var (
	sup      *local.Supervisor
	machine  sandbox.Machine
	endpoint string
	cliBin   string
	testRoot = "/var/tmp/cocoonbox-session-test"
	// clock is every api and rsh clock of these tests: each silence test
	// waits well past it.
	clock = 500 * time.Millisecond
)

const (
	aliceToken = "cb_a11ce00000000000000000000000000000000000000000000000000000000000"
	bobToken   = "cb_b0b0000000000000000000000000000000000000000000000000000000000000"
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	image := os.Getenv("COCOONBOX_IMAGE")
	if os.Geteuid() != 0 || image == "" {
		fmt.Fprintln(os.Stderr, "api/session: needs root and COCOONBOX_IMAGE (a base image root; make box-test sets it)")
		return 1
	}
	stop, err := setUp(image)
	if err != nil {
		fmt.Fprintln(os.Stderr, "api/session:", err)
		if stop != nil {
			stop()
		}
		return 1
	}
	code := m.Run()
	stop()
	return code
}

// setUp boots the box, serves the api and builds the CLI; stop undoes it.
func setUp(image string) (stop func(), err error) {
	images := filepath.Join(testRoot, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return nil, err
	}
	link := filepath.Join(images, "cbdesk-v1-base")
	os.Remove(link)
	if err := os.Symlink(image, link); err != nil {
		return nil, err
	}
	cliBin = filepath.Join(testRoot, "bin", "cocoonbox")
	if out, err := exec.Command("go", "build", "-o", cliBin, "../cmd/cocoonbox").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the CLI: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	net := local.DefaultNetwork()
	net.Bridge, net.Gateway = "cbsession0", netip.MustParsePrefix("10.204.0.1/16")
	sup, err = local.New(ctx, local.Config{StateDir: filepath.Join(testRoot, "state"), Images: images,
		Network: net, EgressHosts: []string{"debian.org"}, Log: log})
	if err != nil {
		return nil, err
	}
	stops := []func(){func() { sup.Close(); os.RemoveAll(testRoot) }}
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	old, _ := sup.List(ctx, "")
	for _, m := range old {
		_ = sup.Delete(ctx, m.ID)
	}
	if machine, err = sup.Create(ctx, sandbox.Spec{ID: fmt.Sprintf("s-%d", os.Getpid()), Tenant: "alice", Image: "cbdesk:v1-base"}); err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = sup.Delete(context.Background(), machine.ID) })
	if machine, err = sup.Boot(ctx, machine.ID); err != nil {
		return stop, err
	}
	url, stopAPI, err := serve(log)
	if err != nil {
		return stop, err
	}
	endpoint = url
	stops = append(stops, stopAPI)
	return stop, nil
}

// located are the test's boxes, as boxes.Service.Locate answers them:
// alice's dev (the booted machine) and sleepy (hibernated), bob's bobs (on
// the same machine, but not alice's).
func located() map[string][]boxes.Located {
	return map[string][]boxes.Located{
		"alice": {
			{BoxID: machine.ID, Name: "dev", State: boxes.Running, Supervisor: sup},
			{BoxID: "cb-sleepy", Name: "sleepy", State: boxes.Hibernated, Supervisor: sup},
		},
		"bob": {{BoxID: "cb-bobs", Name: "bobs", State: boxes.Running, Supervisor: sup}},
	}
}

// locator is the test's boxes.Service: a box of another user is not found.
type locator struct{}

func (locator) Locate(_ context.Context, userID, box string) (boxes.Located, error) {
	for _, b := range located()[userID] {
		if box == "" || box == b.BoxID || box == b.Name {
			if b.BoxID == "cb-bobs" {
				b.BoxID = machine.ID // bob's box runs on the one machine too
			}
			if b.State != boxes.Running {
				return b, fmt.Errorf("box %s is %s: %w", b.Name, b.State, boxes.ErrNotRunning)
			}
			return b, nil
		}
	}
	return boxes.Located{}, fmt.Errorf("box %q: %w", box, boxes.ErrNotFound)
}

type userKey struct{}

// serve runs Session on the api's listener with every clock at clock.
func serve(log *slog.Logger) (string, func(), error) {
	srv := server.New(log, nil)
	srv.SetTimeouts(server.Timeouts{ReadHeader: clock, Idle: clock, PingAfter: clock, PingTimeout: clock})
	svc := session.New(locator{}, func(ctx context.Context) (string, bool) {
		u, ok := ctx.Value(userKey{}).(string)
		return u, ok
	}, log)
	srv.Handle(svc.Handler(connect.WithInterceptors(testTokens{})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-served }, nil
}

// testTokens is the token check of these tests.
type testTokens struct{ connect.Interceptor }

func (testTokens) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		users := map[string]string{"Bearer " + aliceToken: "alice", "Bearer " + bobToken: "bob"}
		if u, ok := users[conn.RequestHeader().Get("Authorization")]; ok {
			ctx = context.WithValue(ctx, userKey{}, u)
		}
		return next(ctx, conn)
	}
}

// client is a Session client with token ("" for none), over h2c.
func client(token string) controlv1connect.SessionClient {
	return controlv1connect.NewSessionClient(wire.H2CClient("", token, 0), endpoint, connect.WithGRPC())
}

// rsh is `cocoonbox rsh ARGS...` as alice, with env added.
func rsh(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, cliBin, append([]string{"rsh"}, args...)...)
	cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+testRoot, "COCOONBOX_ENDPOINT="+endpoint,
		"COCOONBOX_TOKEN="+aliceToken, "COCOONBOX_PING_AFTER="+clock.String(), "PATH="+filepath.Dir(cliBin)+":"+os.Getenv("PATH")), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// inBox runs a shell line in the box as root (the supervisor, not rsh)
// and answers its output; it fails the test when the line fails.
func inBox(t testing.TB, line string) string {
	t.Helper()
	p, err := sup.Exec(context.Background(), machine.ID, sandbox.ExecRequest{Args: []string{"sh", "-c", line}})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(p.Stderr()); errc <- b }()
	out, _ := io.ReadAll(p.Stdout())
	stderr := <-errc
	st, err := p.Wait()
	if err != nil || st.Code != 0 {
		t.Fatalf("in the box: %q: %+v %v: %s%s", line, st, err, out, stderr)
	}
	return string(out)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
