//go:build booted

package session_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
)

// These tests run the api as it runs: `cocoonbox-api serve` built from
// this tree, on its embedded PostgreSQL, with its in-process supervisor on
// a bridge of this package's own (so it runs beside the other packages'
// boxes), every clock of api.yaml's http section at half a second; users
// alice and bob signed in through the console with device tokens; alice's
// box dev made with Boxes.Create and shared by every test; and the real
// cocoonbox CLI built here, and a connect client, calling Session.Exec.

var (
	api        *harness.API
	bins       harness.Binaries
	endpoint   string
	aliceToken string
	bobToken   string
	// box is alice's box dev: its id, which is also its machine's.
	box      string
	testRoot = "/var/tmp/cocoonbox-session-test"
	bridge   = "cbsession0"
	// clock is every api and rsh clock of these tests: each silence test
	// waits well past it.
	clock = 500 * time.Millisecond
)

const password = "correct horse battery"

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/session", SetUp: setUp, TearDown: tearDown, Log: func() string { return api.Log() }})
}

// setUp builds the binaries, starts the api, signs alice and bob in and
// makes alice's box.
func setUp(ctx context.Context, image string) error {
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
	yaml := harness.LocalSandbox(images, filepath.Join(testRoot, "machines"), bridge, "10.210.0.1/16") +
		fmt.Sprintf("http:\n  read_header_timeout: %[1]s\n  idle_timeout: %[1]s\n  ping_after: %[1]s\n  ping_timeout: %[1]s\n", clock)
	if api, err = harness.Start(ctx, bins.API, harness.Options{StateDir: filepath.Join(testRoot, "api"), Sandbox: yaml}); err != nil {
		return err
	}
	endpoint = api.URL
	if aliceToken, err = api.UserToken(ctx, "alice", password, "rsh"); err != nil {
		return err
	}
	if bobToken, err = api.UserToken(ctx, "bob", password, "rsh"); err != nil {
		return err
	}
	box, err = api.CreateBox(ctx, aliceToken, "dev", "")
	return err
}

// waitState waits until alice's box is in state.
func waitState(ctx context.Context, state controlv1.BoxState) error {
	return api.WaitBox(ctx, aliceToken, "dev", state)
}

func tearDown() error {
	if api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if box != "" {
			_ = api.DeleteBox(ctx, aliceToken, "dev")
		}
		_ = api.Stop()
	}
	os.RemoveAll(testRoot)
	return nil
}

// client is a Session client with token ("" for none), over h2c.
func client(token string) controlv1connect.SessionClient {
	return controlv1connect.NewSessionClient(wire.H2CClient("", token, 0), endpoint, connect.WithGRPC())
}

// rsh is `cocoonbox rsh ARGS...` as alice, with env added.
func rsh(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bins.CLI, append([]string{"rsh"}, args...)...)
	cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+testRoot, "COCOONBOX_ENDPOINT="+endpoint,
		"COCOONBOX_TOKEN="+aliceToken, "COCOONBOX_PING_AFTER="+clock.String()), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// leader is the host PID of the box's PID 1.
func leader(t testing.TB) int {
	t.Helper()
	pid, err := harness.Leader(bridge, box)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// inBox runs a shell line in the box as root (nsenter, not the api) and
// answers its output; it fails the test when the line fails.
func inBox(t testing.TB, line string) string {
	t.Helper()
	out, err := harness.InBox(bridge, box, nil, line)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var exitCode = harness.ExitCode
