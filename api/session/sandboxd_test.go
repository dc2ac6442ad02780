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

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Must show, the whole path of a fleet: the api reaching its box through a
// cocoonbox-sandboxd (the api's wire client to it, sandbox.ping_after, and
// the daemon's own --ping-after and --idle-timeout, all at clock besides
// the api's http clocks): a command silent for six clocks and then a
// megabyte is neither cut off nor stalled, and its exit status comes back.
func TestRshThroughSandboxdSilenceLongerThanEveryClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(testRoot, "sandboxd")
	bin := bins.Sandboxd
	sock := filepath.Join(dir, "sandboxd.sock")
	daemon := exec.Command(bin, "--listen", "unix:"+sock, "--state-dir", filepath.Join(dir, "state"),
		"--images", filepath.Join(testRoot, "images"), "--bridge", "cbsession1", "--gateway", "10.211.0.1/16",
		"--egress-hosts", "debian.org", "--ping-after", clock.String(), "--idle-timeout", clock.String())
	daemon.Stdout, daemon.Stderr = os.Stderr, os.Stderr
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		_ = daemon.Wait()
	})
	sbx := wire.NewClient(wire.H2CClient(sock, "", 0), "http://sandboxd")
	wait.Eventually(t, 5*time.Minute, "the daemon answering Images", func() (bool, string) {
		_, err := sbx.Images(ctx)
		return err == nil, fmt.Sprint(err)
	})
	yaml := fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\n  ping_after: %[2]s\n"+
		"http:\n  read_header_timeout: %[2]s\n  idle_timeout: %[2]s\n  ping_after: %[2]s\n  ping_timeout: %[2]s\n", "unix:"+sock, clock)
	far, err := harness.Start(ctx, bins.API, harness.Options{StateDir: filepath.Join(dir, "api"), Sandbox: yaml})
	if err != nil {
		t.Fatal(err)
	}
	defer far.Stop()
	token, err := far.UserToken(ctx, "carol", password, "rsh")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := far.DeleteBox(ctx, token, "far"); err != nil {
			t.Error(err)
		}
	}()
	if _, err := far.CreateBox(ctx, token, "far", ""); err != nil {
		t.Fatalf("%v\n%s", err, far.Log())
	}
	env := []string{"COCOONBOX_ENDPOINT=" + far.URL, "COCOONBOX_TOKEN=" + token}
	silence := 6 * clock
	out, err := rsh(ctx, env, "--box", "far", "--", fmt.Sprintf("sleep %g; head -c 1048576 /dev/urandom", silence.Seconds())).Output()
	if err != nil || len(out) != 1<<20 {
		t.Fatalf("through sandboxd, after %v of silence (clocks at %v): %d bytes, %v\n%s", silence, clock, len(out), err, far.Log())
	}
	if err := rsh(ctx, env, "--box", "far", "--", "exit 130").Run(); exitCode(err) != 130 {
		t.Errorf("exit 130 through sandboxd: %v", err)
	}
}
