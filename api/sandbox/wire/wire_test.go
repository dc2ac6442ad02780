//go:build booted

package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/testcert"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// These tests run the real daemon (cocoonbox-sandboxd, built here) as a
// remote host is run: TLS on TCP (127.0.0.1, a test CA) with a bearer
// token, and drive real machines through Client: the wire as the api uses
// it for an https:// host (issue 24, Deliver 6; the unix socket is the
// api/session and api/e2e/boxes tests'). Its HTTP/2 idle and ping timers are
// shortened to half a second so the silence test waits past every one of
// them.

var (
	client  *Client
	daemon  *exec.Cmd
	runRoot = "/var/tmp/cocoonbox-sandboxd-wiretest"
	image   = "cbdesk:v1-base"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/sandbox/wire", SetUp: startDaemon, TearDown: stopDaemon})
}

// startDaemon builds cocoonbox-sandboxd and starts it on the base image.
func startDaemon(_ context.Context, base string) error {
	images := filepath.Join(runRoot, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return err
	}
	link := filepath.Join(images, "cbdesk-v1-base")
	os.Remove(link)
	if err := os.Symlink(base, link); err != nil {
		return err
	}
	bins, err := harness.Build(context.Background())
	if err != nil {
		return err
	}
	bin := bins.Sandboxd
	certs, err := testcert.Write(runRoot, "sandboxd")
	if err != nil {
		return err
	}
	token := strings.Repeat("w", 40)
	tokenFile := filepath.Join(runRoot, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	daemon = exec.Command(bin, "--listen", addr, "--token-file", tokenFile, "--tls-cert", certs.Cert, "--tls-key", certs.Key,
		"--state-dir", filepath.Join(runRoot, "state"),
		"--images", images, "--egress-hosts", "debian.org", "--ping-after", "500ms", "--ping-timeout", "1m", "--idle-timeout", "500ms")
	daemon.Stdout, daemon.Stderr = os.Stderr, os.Stderr
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := daemon.Start(); err != nil {
		return err
	}
	roots, err := ClientTLS(certs.CA)
	if err != nil {
		return err
	}
	hc := TLSClient(roots, token, 500*time.Millisecond)
	// Pings every half second, as the daemon's, but a loaded host may take
	// longer than that to answer one (a 500 ms timeout cut an Exec there:
	// write: broken pipe): the silence test is about pings sent, not how
	// fast they come back.
	hc.Transport.(bearer).next.(*http.Transport).HTTP2.PingTimeout = time.Minute
	// Under the daemon's idle timeout, as ClientIdle is under its default.
	hc.Transport.(bearer).next.(*http.Transport).IdleConnTimeout = 100 * time.Millisecond
	client = NewClient(hc, "https://"+addr)
	// The daemon waits for the bridge while another supervisor holds it.
	return wait.Until(5*time.Minute, "the daemon answering Images", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := client.Images(ctx)
		return err == nil, fmt.Sprint(err)
	})
}

// stopDaemon stops the daemon (SIGTERM, then SIGKILL after 90 s) and
// removes the test's root.
func stopDaemon() error {
	defer os.RemoveAll(runRoot)
	if daemon == nil || daemon.Process == nil {
		return nil
	}
	_ = daemon.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the daemon's stop: %w", err)
		}
		return nil
	case <-time.After(90 * time.Second):
		_ = daemon.Process.Kill()
		return errors.New("the daemon did not stop within 90 s of SIGTERM")
	}
}

var seq int

func boot(t testing.TB, first ...sandbox.Command) sandbox.Machine {
	t.Helper()
	seq++
	ctx := context.Background()
	m, err := client.Create(ctx, sandbox.Spec{ID: fmt.Sprintf("w-%d-%d", os.Getpid()%10000, seq), Tenant: "wire", Image: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), m.ID); err != nil {
			t.Errorf("delete %s: %v", m.ID, err)
		}
	})
	if m, err = client.Boot(ctx, m.ID, first...); err != nil || m.State != sandbox.Running {
		t.Fatalf("boot: %+v %v", m, err)
	}
	return m
}

// execAll runs a command through the wire, feeding stdin, and returns its
// stdout's length and sha256 and its exit status.
func execAll(t testing.TB, id string, stdin []byte, args ...string) (int64, []byte, sandbox.ExitStatus) {
	t.Helper()
	p, err := client.Exec(context.Background(), id, sandbox.ExecRequest{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(p.Stdin(), bytes.NewReader(stdin))
		p.Stdin().Close()
	}()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	h := sha256.New()
	n, err := io.Copy(h, p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return n, h.Sum(nil), st
}

// Must show (through the wire, as rsh uses it): 100 MiB through stdin and
// back byte-identical; exit statuses 0, 1 and 130; a command silent longer
// than every idle and keepalive timer on the path, then a megabyte, is
// neither cut off nor stalled (e2b #1074, #1352).
func TestWireExecStreamsExitStatusesAndSilence(t *testing.T) {
	m := boot(t)
	data := make([]byte, 100<<20)
	_, _ = rand.Read(data)
	n, sum, st := execAll(t, m.ID, data, "cat")
	if want := sha256.Sum256(data); n != int64(len(data)) || !bytes.Equal(sum, want[:]) || st.Code != 0 {
		t.Fatalf("cat through the wire: %d bytes, %x, %+v", n, sum, st)
	}
	for line, want := range map[string]int{"true": 0, "false": 1, "exit 130": 130, "kill -INT $$": 130} {
		if _, _, st := execAll(t, m.ID, nil, "sh", "-c", line); st.Code != want {
			t.Errorf("%q: %+v, want %d", line, st, want)
		}
	}
	n, _, st = execAll(t, m.ID, nil, "sh", "-c", "sleep 3; head -c 1048576 /dev/urandom")
	if n != 1<<20 || st.Code != 0 {
		t.Fatalf("after 3 s of silence (timers at 0.5 s): %d bytes, %+v", n, st)
	}
}

// The relay, hibernate and wake, the event stream and the errors cross
// the wire as they are.
func TestWireRelayHibernateWakeEventsAndErrors(t *testing.T) {
	ctx := context.Background()
	events, err := client.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := boot(t)
	if _, _, st := execAll(t, m.ID, nil, "sh", "-c", "setsid -f systemd-socket-activate -l 127.0.0.1:7443 -a --inetd sh -c 'echo relayed; cat' </dev/null >/dev/null 2>&1"); st.Code != 0 {
		t.Fatalf("listener: %+v", st)
	}
	wait.Eventually(t, 2*time.Minute, "the relay to 127.0.0.1:7443 in the box", func() (bool, string) {
		c, err := client.Dial(ctx, m.ID, 7443)
		if errors.Is(err, sandbox.ErrUnavailable) {
			return false, "not listening yet: " + err.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintln(c, "echoed")
		r := bufio.NewReader(c)
		a, _ := r.ReadString('\n')
		b, _ := r.ReadString('\n')
		return a+b == "relayed\nechoed\n", fmt.Sprintf("%q", a+b)
	})
	if h, err := client.Hibernate(ctx, m.ID); err != nil || h.State != sandbox.Hibernated {
		t.Fatalf("hibernate: %+v %v", h, err)
	}
	if _, err := client.Exec(ctx, m.ID, sandbox.ExecRequest{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("exec in a hibernated machine: %v, want ErrState", err)
	}
	if _, err := client.Dial(ctx, m.ID, 7443); !errors.Is(err, sandbox.ErrState) {
		t.Errorf("relay to a hibernated machine: %v, want ErrState", err)
	}
	if w, err := client.Wake(ctx, m.ID); err != nil || w.State != sandbox.Running {
		t.Fatalf("wake: %+v %v", w, err)
	}
	var seen []sandbox.State
	timeout := time.After(10 * time.Second)
	for len(seen) < 5 {
		select {
		case e := <-events:
			if e.Machine == m.ID {
				seen = append(seen, e.State)
			}
		case <-timeout:
			t.Fatalf("events of %s: %v", m.ID, seen)
		}
	}
	want := []sandbox.State{sandbox.Stopped, sandbox.Starting, sandbox.Running, sandbox.Hibernated, sandbox.Running}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", seen, want)
	}
	// A save's name crosses the wire: the daemon keeps it under that name.
	name := fmt.Sprintf("save-%016x", uint64(os.Getpid())<<8|uint64(seq))
	if s, err := client.Save(ctx, m.ID, name); err != nil || s.ID != name || s.Machine != m.ID || s.Size <= 0 {
		t.Errorf("save named %s through the wire: %+v %v", name, s, err)
	}
	if err := client.DeleteSave(ctx, name); err != nil {
		t.Errorf("delete save %s: %v", name, err)
	}
	var inv *sandbox.InvalidError
	if _, err := client.Save(ctx, m.ID, "save-1"); !errors.As(err, &inv) || inv.Field != "save_id" {
		t.Errorf("a malformed save name through the wire: %v", err)
	}
	if _, err := client.Create(ctx, sandbox.Spec{ID: "Bad", Tenant: "wire", Image: image}); !errors.As(err, &inv) || inv.Field != "spec.id" {
		t.Errorf("a bad id through the wire: %v", err)
	}
	if _, err := client.Get(ctx, "nobody-here"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("an unknown machine: %v", err)
	}
	if _, err := client.Exec(ctx, m.ID, sandbox.ExecRequest{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("an empty command: %v", err)
	}
	if got := strings.TrimSpace(fmt.Sprint(mustList(t))); !strings.Contains(got, m.ID) {
		t.Errorf("list: %s", got)
	}
}

func mustList(t *testing.T) []sandbox.Machine {
	ms, err := client.List(context.Background(), "wire")
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// Boot's first commands cross the wire whole: their arguments and stdin
// reach the daemon's supervisor, which runs them in the booting box.
func TestWireBootCarriesTheFirstCommands(t *testing.T) {
	stdin := []byte("through the wire\n\x00\xff")
	m := boot(t, sandbox.Command{Args: []string{"sh", "-c", "cat >/run/wire-first-$1", "sh", "a b"}, Stdin: stdin})
	n, sum, st := execAll(t, m.ID, nil, "cat", "/run/wire-first-a b")
	want := sha256.Sum256(stdin)
	if st.Code != 0 || n != int64(len(stdin)) || !bytes.Equal(sum, want[:]) {
		t.Fatalf("the first command wrote %d bytes (sha256 %x, exit %+v); want its stdin, %d bytes", n, sum, st, len(stdin))
	}
	// The machine id crosses the wire too (issue 24, Deliver 9).
	_, sum, st = execAll(t, m.ID, nil, "cat", "/etc/machine-id")
	want = sha256.Sum256([]byte(m.MachineID + "\n"))
	if st.Code != 0 || len(m.MachineID) != 32 || !bytes.Equal(sum, want[:]) {
		t.Fatalf("Boot's answer through the wire: machine id %q, not the box's /etc/machine-id", m.MachineID)
	}
}
