//go:build booted

// Package boxcli tests the CLI's box commands as a user runs them: the
// cocoonbox binary against a real `cocoonbox-api serve` (its embedded
// PostgreSQL, its local supervisor booting real boxes under
// systemd-nspawn from the built base image), signed in with a device
// token. One api and one supervisor serve the package (a supervisor holds
// the box bridge alone), and the lifecycle's subtests share one box.
//
// Root, and $COCOONBOX_IMAGE (make image; make box-test sets it).
//
// Contract: Boxes (api) ↔ sandboxd; Control MCP (states and phases).
package boxcli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
)

// the api of the package, and alice's and bob's CLIs signed in to it.
var (
	api        *harness.API
	alice, bob harness.CLI
	// token is alice's device token, for the test's own Boxes client.
	token string
)

const password = "correct horse battery"

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/e2e/boxcli", SetUp: setUp, TearDown: tearDown, Log: func() string { return api.Log() }})
}

// testDir is the package's directory under /var/tmp (setUp makes it).
var testDir string

func setUp(ctx context.Context, image string) error {
	var err error
	if testDir, err = os.MkdirTemp("/var/tmp", "cocoonbox-boxcli-test-"); err != nil {
		return err
	}
	os.Chmod(testDir, 0o755) // the embedded cluster's user (postgres) enters it
	return start(ctx, testDir, image)
}

// tearDown stops the api and removes the package's directory.
func tearDown() error {
	var err error
	if api != nil {
		err = api.Stop()
	}
	if testDir != "" {
		os.RemoveAll(testDir)
	}
	return err
}

// start builds the binaries, makes the image catalog (v1 and v2 of the
// base image), starts the api on it and signs alice in.
func start(ctx context.Context, dir, image string) error {
	bins, err := harness.Build(ctx)
	if err != nil {
		return err
	}
	images := filepath.Join(dir, "images")
	if _, err := localtest.Catalog(images, image, ""); err != nil {
		return err
	}
	// A box network of the package's own, so it runs beside the other
	// packages that boot boxes (each bridge has one supervisor).
	sandbox := harness.LocalSandbox(images, filepath.Join(dir, "machines"), "cbboxcli0", "10.212.0.1/16")
	api, err = harness.Start(ctx, bins.API, harness.Options{StateDir: filepath.Join(dir, "state"), Sandbox: sandbox})
	if err != nil {
		return err
	}
	if alice, token, err = signIn(ctx, bins, dir, "alice"); err != nil {
		return err
	}
	bob, _, err = signIn(ctx, bins, dir, "bob")
	return err
}

// signIn makes the user and signs a CLI of their own in with a device
// token (login --token-stdin, so it lands in cli.json).
func signIn(ctx context.Context, bins harness.Binaries, dir, user string) (harness.CLI, string, error) {
	return api.SignInCLI(ctx, bins.CLI, filepath.Join(dir, user), user, password, "boxcli test")
}

// result is one CLI run: its standard output and error apart, and its
// exit code.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs alice's CLI with args (its endpoint from cli.json, or
// --endpoint when args give one) and waits at most 3 minutes.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, alice, args...)
}

// bobCLI is cli as bob.
func bobCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, bob, args...)
}

func runCLI(t *testing.T, c harness.CLI, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+c.ConfigDir)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cocoonbox %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// okSaid is ok answering stderr: the text progress of a box operation,
// which is said there, stdout kept for answers (issue 45, Deliver 3).
func okSaid(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.code != 0 {
		t.Fatalf("cocoonbox %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	if r.stdout != "" {
		t.Fatalf("cocoonbox %s printed %q on stdout, want its progress on stderr only", strings.Join(args, " "), r.stdout)
	}
	return r.stderr
}

// ok is cli that fails the test unless the command exits 0.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.code != 0 {
		t.Fatalf("cocoonbox %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
