//go:build booted

// Package screen tests the screen (Session.Screen, its WebSocket form
// and `cocoonbox screen`) against a booted desk box, as the api runs:
// `cocoonbox-api serve` built from this tree with its in-process
// supervisor on a bridge of this package's own, the desk image (Xorg :0
// with TigerVNC's module on the box's 127.0.0.1:5900) from
// COCOONBOX_DESK_IMAGE, users alice and bob signed in with device tokens,
// and alice's box desk shared by every test. docs/screen.md.
package screen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
)

var (
	api        *harness.API
	bins       harness.Binaries
	aliceToken string
	bobToken   string
	box        string // alice's box desk: its id, also its machine's
	testRoot   = "/var/tmp/cocoonbox-screen-test"
	bridge     = "cbscreen0"
)

const password = "correct horse battery"

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/screen", SetUp: setUp, TearDown: tearDown, Log: func() string {
		if api == nil {
			return ""
		}
		return api.Log()
	}})
}

// setUp boots alice's desk box from COCOONBOX_DESK_IMAGE (the base image
// harness.Main is given has no desktop) and waits until its VNC answers.
func setUp(ctx context.Context, _ string) error {
	image := os.Getenv("COCOONBOX_DESK_IMAGE")
	if image == "" {
		return errors.New("the screen tests need a desk box: set COCOONBOX_DESK_IMAGE to the desk image root (make box-test does)")
	}
	images := filepath.Join(testRoot, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return err
	}
	link := filepath.Join(images, "cbdesk-v1-base")
	os.Remove(link)
	if err := os.Symlink(image, link); err != nil {
		return err
	}
	var err error
	if bins, err = harness.Build(ctx); err != nil {
		return err
	}
	yaml := harness.LocalSandbox(images, filepath.Join(testRoot, "machines"), bridge, "10.226.0.1/16")
	if api, err = harness.Start(ctx, bins.API, harness.Options{StateDir: filepath.Join(testRoot, "api"), Sandbox: yaml, OAuth: true}); err != nil {
		return err
	}
	if aliceToken, err = api.UserToken(ctx, "alice", password, "screen"); err != nil {
		return err
	}
	if bobToken, err = api.UserToken(ctx, "bob", password, "screen"); err != nil {
		return err
	}
	if box, err = api.CreateBox(ctx, aliceToken, "desk", ""); err != nil {
		return err
	}
	return waitVNC(ctx)
}

// waitVNC waits until the box's own 127.0.0.1:5900 answers RFB (the
// desktop starts after the box is running).
func waitVNC(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		c, err := dialDirect()
		if err == nil {
			// The whole handshake: one that ended before it would count
			// toward the VNC's blacklist (docs/screen.md).
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = dialRFB(c)
			c.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the box's VNC on 127.0.0.1:5900 did not answer within 3 minutes: %v", last)
}

func tearDown() error {
	if api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if box != "" {
			_ = api.DeleteBox(ctx, aliceToken, "desk")
		}
		_ = api.Stop()
	}
	os.RemoveAll(testRoot)
	return nil
}

// client is a Session client with token, over h2c.
func client(token string) controlv1connect.SessionClient {
	return controlv1connect.NewSessionClient(wire.H2CClient("", token, 0), api.URL, connect.WithGRPC())
}

// dialDirect connects to the box's own 127.0.0.1:5900 from inside its
// network namespace, past the api and the supervisor: the direct
// connection the benchmark compares with, and the tests' look at the
// box's VNC that does not go through what they test.
func dialDirect() (net.Conn, error) {
	pid, err := harness.Leader(bridge, box)
	if err != nil {
		return nil, err
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer host.Close()
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result)
	go func() {
		// The thread enters the box's namespace for the socket call only;
		// a thread that cannot come back is not given back to Go.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("enter the box's network namespace: %w", err)}
			return
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:5900", 5*time.Second)
		if unix.Setns(int(host.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// screenCLI starts `cocoonbox screen NAME` with token and answers the port
// it printed; the command ends with the test.
func screenCLI(t testing.TB, token, name string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bins.CLI, "screen", name)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "COCOONBOX_ENDPOINT="+api.URL, "COCOONBOX_TOKEN="+token)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line := make([]byte, 512)
	n, err := out.Read(line)
	if err != nil {
		t.Fatalf("cocoonbox screen printed nothing: %v", err)
	}
	var port int
	if _, err := fmt.Sscanf(string(line[:n]), "The screen of "+name+" is a VNC endpoint on 127.0.0.1:%d", &port); err != nil {
		t.Fatalf("cocoonbox screen's first line %q: %v", line[:n], err)
	}
	return port
}

// revoke sends token to POST /cocoonbox.oauth/revoke, as a client signing
// out does (Contract: Browser sign-in and device tokens).
func revoke(t testing.TB, token string) {
	t.Helper()
	resp, err := http.PostForm(api.URL+"/cocoonbox.oauth/revoke", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
}

// newDevice signs name in to the console again and answers a new device
// token of theirs, and the console.
func newDevice(t testing.TB, name, device string) (string, *harness.Console) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := harness.SignIn(ctx, api.URL, name, password)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.Device(ctx, device)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}
