//go:build booted

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
)

// These tests boot real cbdesk machines under systemd-nspawn (root, and
// the images `make image` builds: $COCOONBOX_IMAGE, and
// $COCOONBOX_DESK_IMAGE for the desk tests). One supervisor serves the
// whole package, on the contract's bridge; a crashed earlier run's boxes
// are cleared by New and its machines deleted before the tests start.

var (
	sup      *Supervisor
	testRoot = "/var/tmp/cocoonbox-sandboxd-test"
	seq      atomic.Int64
	// supLog is what the supervisor logged at Info and above.
	supLog syncbuf.Buffer
	// v1, v2 are the base image as two versions (v2 a hard-linked copy
	// with another /etc/cocoonbox/image), for rebase.
	v1, v2 = "cbdesk:v1-base", "cbdesk:v2-base"
	desk   = "cbdesk:v1-desk"
	// baseStamp is the first line of the built base image's
	// /etc/cocoonbox/image (cbdesk:v<image/VERSION>), which the catalog
	// serves as v1.
	baseStamp string
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/sandbox/local", SetUp: setUp, TearDown: tearDown})
}

// setUp makes the image catalog and the package's supervisor, and deletes
// the machines a crashed earlier run left.
func setUp(ctx context.Context, image string) error {
	var err error
	if baseStamp, err = localtest.Catalog(filepath.Join(testRoot, "images"), image, os.Getenv("COCOONBOX_DESK_IMAGE")); err != nil {
		return err
	}
	// The mirror's addresses the proxy would refuse (on this project's
	// machines deb.debian.org is a documentation address), admitted.
	admit, _, err := harness.MirrorAdmit(ctx, image)
	if err != nil {
		return err
	}
	caFile, err := startVaultUpstream()
	if err != nil {
		return err
	}
	gwUp = gwtest.New()
	sup, err = New(ctx, Config{
		// The gw stand-in behind the gw door (gwdoor_test.go).
		GWURL:    gwUp.URL,
		StateDir: filepath.Join(testRoot, "state"), Images: filepath.Join(testRoot, "images"),
		// Only Debian's mirror, which apt in the boxes reaches, and the
		// key vault's test upstream (intercept_test.go).
		EgressHosts:          []string{"deb.debian.org", "debian.org", vaultHost},
		EgressResolve:        map[string]netip.Addr{vaultHost: netip.MustParseAddr("127.0.0.1")},
		EgressUpstreamCAFile: caFile,
		EgressAdmit:          admit,
		DefaultMaxClaims:     1000,
		// Warnings on stderr; everything from Info kept for a failing
		// test to print (the egress proxy says why it refused or failed
		// a request at Info).
		Log: slog.New(slog.NewMultiHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
			slog.NewTextHandler(&supLog, &slog.HandlerOptions{Level: slog.LevelInfo}))),
	})
	if err != nil {
		return err
	}
	old, _ := sup.List(ctx, "")
	for _, mm := range old {
		_ = sup.Delete(ctx, mm.ID)
	}
	return nil
}

// tearDown closes the supervisor and removes the state and the test's
// image catalog (links, and v2 as hard links).
func tearDown() error {
	var err error
	if sup != nil {
		err = sup.Close()
	}
	if gwUp != nil {
		gwUp.Close()
	}
	os.RemoveAll(testRoot)
	return err
}

// newID is a machine id no other test uses.
func newID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid()%10000, seq.Add(1))
}

// boot creates and boots a machine of image, deleted when the test ends.
func boot(t testing.TB, image string) sandbox.Machine {
	t.Helper()
	ctx := context.Background()
	m, err := sup.Create(ctx, sandbox.Spec{ID: newID("t"), Tenant: "tenant-a", Image: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteMachine(t, m.ID) })
	m, err = sup.Boot(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func deleteMachine(t testing.TB, id string) {
	if t.Failed() {
		t.Logf("console of %s:\n%s", id, nspawn.ConsoleTail(filepath.Join(sup.cfg.StateDir, "machines", id, "console.log"), 40))
	}
	if err := sup.Delete(context.Background(), id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("delete %s: %v", id, err)
	}
}

// sh runs a shell line in the machine as root and returns its stdout and
// exit code; it fails the test when the command cannot run.
func sh(t testing.TB, id, line string) (string, int) {
	t.Helper()
	return shell(t, id, "sh", line)
}

// shell is sh with another shell (bash for its /dev/tcp).
func shell(t testing.TB, id, shell, line string) (string, int) {
	t.Helper()
	return run(t, id, sandbox.ExecRequest{Args: []string{shell, "-c", line}})
}

// run is sh with any request (another user, no shell).
func run(t testing.TB, id string, req sandbox.ExecRequest) (string, int) {
	t.Helper()
	out, _, code := runAll(t, id, req)
	return out, code
}

// runAll is run that answers the command's stderr too.
func runAll(t testing.TB, id string, req sandbox.ExecRequest) (stdout, stderr string, code int) {
	t.Helper()
	line := strings.Join(req.Args, " ")
	p, err := sup.Exec(context.Background(), id, req)
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	p.Stdin().Close()
	var errOut strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&errOut, p.Stderr()); close(done) }()
	out, _ := io.ReadAll(p.Stdout())
	<-done
	st, err := p.Wait()
	if err != nil {
		t.Fatalf("exec %q: %v (stderr %s)", line, err, errOut.String())
	}
	return string(out), errOut.String(), st.Code
}

// mustSh is sh that fails the test on a non-zero exit, saying what the
// command wrote on stdout and on stderr.
func mustSh(t testing.TB, id, line string) string {
	t.Helper()
	out, errOut, code := runAll(t, id, sandbox.ExecRequest{Args: []string{"sh", "-c", line}})
	if code != 0 {
		t.Fatalf("%q exited %d\nstdout: %s\nstderr: %s", line, code, out, errOut)
	}
	return out
}

// detached starts a process in the machine that outlives the exec (setsid
// -f) and returns its PID in the box: the process writes its own $$ to a
// file before it execs, and the test waits for that file. Its command
// line (sleep 86400.<n>) is unique, checked through /proc: the box runs
// sleeps of its own (the base tier's `sleep infinity`), which `pgrep -n
// -x sleep` after a fixed pause returned whenever this one started late.
func detached(t testing.TB, id string) string {
	t.Helper()
	n := seq.Add(1)
	arg := fmt.Sprintf("86400.%d", n)
	file := fmt.Sprintf("/run/cocoonbox-test-detached-%d", n)
	pid := strings.TrimSpace(mustSh(t, id, fmt.Sprintf(`setsid -f sh -c 'echo $$ >%[1]s.tmp && mv %[1]s.tmp %[1]s && exec sleep %[2]s' </dev/null >/dev/null 2>&1
until [ -s %[1]s ]; do sleep 0.01; done; cat %[1]s; rm -f %[1]s`, file, arg)))
	// The control: the PID is the process started here, not another sleep.
	if got := mustSh(t, id, "tr '\\0' ' ' </proc/"+pid+"/cmdline"); got != "sleep "+arg+" " {
		t.Fatalf("PID %s in the box runs %q, not the test's sleep %s", pid, got, arg)
	}
	return pid
}
