//go:build booted

package escape_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
	"golang.org/x/sys/unix"
)

// The suite boots real boxes (root, and the base image `make image`
// builds: $COCOONBOX_IMAGE) under one supervisor of its own, on a bridge
// and subnet no other package takes, so it runs beside them. Box A is the
// attacker's; box B is the other tenant's, with a canary in its /root, a
// process and an abstract unix socket; the host holds two canaries (in
// the supervisor's state directory and in /root) and a process of its
// own.

const (
	testRoot  = "/var/tmp/cocoonbox-escape-test"
	image     = "cbdesk:v1-base"
	probePath = "/usr/local/bin/cocoonbox-probe"
	// configPath is where the probe reads its Config by default.
	configPath = "/usr/local/share/cocoonbox-probe.json"
)

var (
	sup      *local.Supervisor
	stateDir = filepath.Join(testRoot, "state")
	probeBin = filepath.Join(testRoot, "probe")
	// hostCanaries are files on the host no box may read or change; boxB
	// holds the other box's.
	hostCanaries []canary
	// hostSleep is the host's own process, its marker in its command line
	// and a canary's content in its environment.
	hostSleep  *exec.Cmd
	hostMarker string
	boxA, boxB *otherBox
)

// canary is a file of random content at path; paths are other names of
// the same file (another box's canary by its host paths).
type canary struct {
	path    string
	content string
	mtime   time.Time
}

// otherBox is a booted box and what the suite put in it.
type otherBox struct {
	id      string
	canary  canary // in the box's /root, by its path in the box
	marker  string // in its holder's command line
	socket  string // the holder's abstract socket
	hostDir string // the machine's directory on the host
}

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/sandbox/escape", SetUp: setUp, TearDown: tearDown})
}

func random() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// setUp builds the probe, starts the supervisor, writes the host's
// canaries, starts the host's process and boots boxes A and B.
func setUp(ctx context.Context, base string) error {
	if _, err := localtest.Catalog(filepath.Join(testRoot, "images"), base, ""); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", probeBin, "./probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the probe: %v: %s", err, out)
	}
	var err error
	sup, err = local.New(ctx, local.Config{
		StateDir: stateDir, Images: filepath.Join(testRoot, "images"),
		// This package's own bridge and /16 (tests/lint-box-networks).
		Network:     local.Network{Bridge: "cbescape0", Gateway: netip.MustParsePrefix("10.218.0.1/16"), Ports: local.DefaultNetwork().Ports},
		EgressHosts: []string{"debian.org"},
		Log:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	old, _ := sup.List(ctx, "")
	for _, m := range old {
		_ = sup.Delete(ctx, m.ID)
	}
	for _, p := range []string{filepath.Join(stateDir, "escape-canary"), fmt.Sprintf("/root/cocoonbox-escape-canary-%d", os.Getpid())} {
		c := canary{path: p, content: "canary-" + random()}
		if err := os.WriteFile(p, []byte(c.content+"\n"), 0o600); err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		c.mtime = st.ModTime()
		hostCanaries = append(hostCanaries, c)
	}
	// An hour at most, should a crashed run leave it (Pdeathsig would end
	// it with setUp's thread, not with the test process).
	hostMarker = fmt.Sprintf("3600.%d%d", os.Getpid(), time.Now().UnixNano()%1e9)
	hostSleep = exec.Command("sleep", hostMarker)
	hostSleep.Env = []string{"COCOONBOX_ESCAPE_CANARY=" + hostCanaries[0].content}
	if err := hostSleep.Start(); err != nil {
		return err
	}
	if boxB, err = bootBox(ctx, "escb", "tenant-b"); err != nil {
		return err
	}
	if err := boxB.holdCanary(ctx); err != nil {
		return err
	}
	boxA, err = bootBox(ctx, "esca", "tenant-a")
	return err
}

// tearDown deletes the boxes, stops the supervisor and the host's
// process, and removes the canaries and the test's root.
func tearDown() error {
	var errs []error
	if sup != nil {
		ctx := context.Background()
		for _, b := range []*otherBox{boxA, boxB} {
			if b != nil {
				if err := sup.Delete(ctx, b.id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
					errs = append(errs, err)
				}
			}
		}
		errs = append(errs, sup.Close())
	}
	if hostSleep != nil && hostSleep.Process != nil {
		hostSleep.Process.Kill()
		hostSleep.Wait()
	}
	for _, c := range hostCanaries {
		os.Remove(c.path)
	}
	os.RemoveAll(testRoot)
	return errors.Join(errs...)
}

// bootBox creates and boots a box and installs the probe in it.
func bootBox(ctx context.Context, prefix, tenant string) (*otherBox, error) {
	id := fmt.Sprintf("%s-%d", prefix, os.Getpid()%100000)
	m, err := sup.Create(ctx, sandbox.Spec{ID: id, Tenant: tenant, Image: image})
	if err != nil {
		return nil, err
	}
	b := &otherBox{id: m.ID, hostDir: filepath.Join(stateDir, "machines", m.ID)}
	if _, err := sup.Boot(ctx, m.ID); err != nil {
		return b, err
	}
	bin, err := os.ReadFile(probeBin)
	if err != nil {
		return b, err
	}
	if _, err := rootSh(ctx, b.id, "cat >"+probePath+".tmp && chmod 755 "+probePath+".tmp && mv "+probePath+".tmp "+probePath, bin); err != nil {
		return b, fmt.Errorf("install the probe in %s: %w", b.id, err)
	}
	return b, nil
}

// holdCanary writes the box's canary into its /root and starts its
// holder (a process with the box's marker, listening on an abstract unix
// socket).
func (b *otherBox) holdCanary(ctx context.Context) error {
	b.canary = canary{path: "/root/cocoonbox-escape-canary-b", content: "canary-" + random()}
	b.marker = "holder-" + random()[:12]
	b.socket = "cocoonbox-escape-" + random()[:12]
	if _, err := rootSh(ctx, b.id, "umask 077 && cat >"+b.canary.path, []byte(b.canary.content+"\n")); err != nil {
		return err
	}
	_, err := rootSh(ctx, b.id, fmt.Sprintf(`setsid -f %s hold %s %s </dev/null >/dev/null 2>&1
timeout 20 sh -c 'until [ -e /run/cocoonbox-probe-hold.ready ]; do sleep 0.05; done'`, probePath, b.marker, b.socket), nil)
	return err
}

// hostPaths are the box canary's names on the host: in the machine's
// upper layer (the host's disk) and in its merged root.
func (b *otherBox) hostPaths() []string {
	return []string{filepath.Join(b.hostDir, "upper", b.canary.path), filepath.Join(b.hostDir, "root", b.canary.path)}
}

// config is the probe's Config for an attacker in box A (and on the
// host, the control).
func config(t testing.TB) escape.Config {
	t.Helper()
	var st, loop unix.Stat_t
	if err := unix.Stat(hostCanaries[0].path, &st); err != nil {
		t.Fatal(err)
	}
	c := escape.Config{
		BoxFiles: boxB.hostPaths(), BoxPath: boxB.canary.path,
		Disk:       fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)),
		Loop:       "7:0",
		HostMarker: hostMarker, BoxMarker: boxB.marker, SupervisorMarker: os.Args[0],
		Abstract: boxB.socket, StateDir: stateDir,
	}
	if unix.Stat("/dev/loop0", &loop) == nil {
		c.Loop = fmt.Sprintf("%d:%d", unix.Major(loop.Rdev), unix.Minor(loop.Rdev))
	}
	for _, h := range hostCanaries {
		c.HostFiles = append(c.HostFiles, h.path)
	}
	return c
}

// rootSh runs a shell line in box id as root with stdin and answers its
// stdout; a non-zero exit is an error.
func rootSh(ctx context.Context, id, line string, stdin []byte) (string, error) {
	out, errOut, code, err := run(ctx, id, sandbox.ExecRequest{Args: []string{"sh", "-c", line}}, stdin)
	if err == nil && code != 0 {
		err = fmt.Errorf("%q exited %d: %s", line, code, errOut)
	}
	return out, err
}

// run runs req in box id with stdin and answers its stdout, stderr and
// exit code.
func run(ctx context.Context, id string, req sandbox.ExecRequest, stdin []byte) (string, string, int, error) {
	p, err := sup.Exec(ctx, id, req)
	if err != nil {
		return "", "", 0, err
	}
	go func() {
		p.Stdin().Write(stdin)
		p.Stdin().Close()
	}()
	var errOut bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&errOut, p.Stderr()); close(done) }()
	out, _ := io.ReadAll(p.Stdout())
	<-done
	st, err := p.Wait()
	return string(out), errOut.String(), st.Code, err
}

// writeConfig puts c in box id where the probe reads it.
func writeConfig(ctx context.Context, id string, c escape.Config) error {
	data, _ := json.Marshal(c)
	_, err := rootSh(ctx, id, "mkdir -p "+filepath.Dir(configPath)+" && cat >"+configPath+" && chmod 644 "+configPath, data)
	return err
}

// parse reads the probe's one JSON line from its output; output without
// one fails the test (a probe that did not run did not show the box held).
func parse(t testing.TB, name, out, errOut string) escape.Result {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r escape.Result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || r.Case != name {
		t.Fatalf("no result line from the probe's %s: stdout %q, stderr %q", name, out, errOut)
	}
	return r
}

// noCanaryIn fails the test when a canary's content is in out.
func noCanaryIn(t testing.TB, out string) {
	t.Helper()
	for _, c := range append(append([]canary{}, hostCanaries...), boxB.canary) {
		if strings.Contains(out, c.content) {
			t.Errorf("the content of the canary %s is in the output: %q", c.path, out)
		}
	}
}

// hostUnchanged fails the test when a host canary's content or mtime
// changed.
func hostUnchanged(t testing.TB) {
	t.Helper()
	for _, c := range hostCanaries {
		data, err := os.ReadFile(c.path)
		st, serr := os.Stat(c.path)
		if err != nil || serr != nil || string(data) != c.content+"\n" || !st.ModTime().Equal(c.mtime) {
			t.Errorf("the host canary %s changed: %v %v", c.path, err, serr)
		}
	}
}

// cases are the probe's cases (probe list), but the persisting one,
// which TestAProcessDoesNotOutliveItsBox runs.
func cases(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command(probeBin, "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if !strings.HasPrefix(n, "persist/") {
			names = append(names, n)
		}
	}
	return names
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
