package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/testcert"
)

// cat is a stand-in supervisor whose every Exec is `cat`: stdin back on
// stdout, exit 0 at end of file. It counts the commands it ran. Any other
// call panics (the embedded nil Supervisor).
type cat struct {
	sandbox.Supervisor
	ran atomic.Int64
}

func (c *cat) Exec(_ context.Context, _ string, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	c.ran.Add(1)
	r, w := io.Pipe()
	return &catProcess{r: r, w: w}, nil
}

type catProcess struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *catProcess) Stdin() io.WriteCloser { return p.w }
func (p *catProcess) Stdout() io.Reader     { return p.r }
func (p *catProcess) Stderr() io.Reader     { return strings.NewReader("") }
func (p *catProcess) Resize(context.Context, sandbox.WindowSize) error {
	return sandbox.Invalid("tty.size", "no terminal")
}
func (p *catProcess) Wait() (sandbox.ExitStatus, error) { return sandbox.ExitStatus{}, nil }

// tlsDaemon serves sup the way the daemon does, on TLS at 127.0.0.1 with a
// token, and answers the api's client for it (sandbox.ca_file: the CA).
func tlsDaemon(t *testing.T, sup sandbox.Supervisor, idle time.Duration) (*wire.Client, testcert.Files, string) {
	t.Helper()
	dir := t.TempDir()
	certs := mustCerts(t, dir, "sandboxd")
	token := strings.Repeat("k", 40)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{listen: "127.0.0.1:0", tokenFile: tokenFile, tlsCert: certs.Cert, tlsKey: certs.Key, pingAfter: time.Minute, idle: idle}
	ep, err := openEndpoint(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(o, ep, sup, slog.New(slog.DiscardHandler))
	go ep.serve(srv)
	t.Cleanup(func() { srv.Close() })
	roots, err := wire.ClientTLS(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + ep.ln.Addr().String()
	return wire.NewClient(wire.TLSClient(roots, token, time.Minute), base), certs, base
}

func mustCerts(t *testing.T, dir, name string) testcert.Files {
	t.Helper()
	f, err := testcert.Write(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// catAll runs cat through c with in as its stdin and answers its stdout.
func catAll(c *wire.Client, in []byte) ([]byte, error) {
	p, err := c.Exec(context.Background(), "m", sandbox.ExecRequest{Args: []string{"cat"}})
	if err != nil {
		return nil, err
	}
	go func() {
		_, _ = io.Copy(p.Stdin(), bytes.NewReader(in))
		p.Stdin().Close()
	}()
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		return nil, err
	}
	if st, err := p.Wait(); err != nil || st.Code != 0 {
		return nil, errors.Join(err, errors.New("cat did not exit 0"))
	}
	return out, nil
}

// Issue 24, Deliver 6: a sandboxd on TLS works end to end: the api's
// client (sandbox.ca_file, the token) streams an Exec's stdin and stdout
// through the daemon's TLS listener and the wire handler, 4 MiB byte for
// byte; a client that trusts another CA, or speaks cleartext, gets
// nothing through.
func TestATLSSandboxdStreamsAnExecEndToEnd(t *testing.T) {
	c, _, base := tlsDaemon(t, &cat{}, time.Minute)
	in := make([]byte, 4<<20)
	rand.Read(in)
	out, err := catAll(c, in)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("4 MiB through cat over TLS: %d bytes back, equal %v, %v", len(out), bytes.Equal(out, in), err)
	}
	other := mustCerts(t, t.TempDir(), "other")
	roots, err := wire.ClientTLS(other.CA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catAll(wire.NewClient(wire.TLSClient(roots, strings.Repeat("k", 40), 0), base), []byte("x")); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another CA: %v, want a certificate error", err)
	}
	plain := wire.NewClient(wire.H2CClient("", strings.Repeat("k", 40), 0), strings.Replace(base, "https://", "http://", 1))
	if _, err := catAll(plain, []byte("x")); err == nil {
		t.Error("a cleartext client reached the TLS daemon")
	}
}

// The idle-close retry (bfe53f5, b2f81d1) holds over TLS: with the
// daemon's idle timeout at 5 ms, 300 Execs start at every point around it
// (the sleeps are the sweep, nothing is waited on): each succeeds, and
// each runs once.
func TestAnExecCrossingTheTLSDaemonsIdleCloseIsSentAgainAndRunsOnce(t *testing.T) {
	sup := &cat{}
	c, _, _ := tlsDaemon(t, sup, 5*time.Millisecond)
	const n = 300
	for i := range n {
		time.Sleep(time.Duration(i%12) * 500 * time.Microsecond)
		if out, err := catAll(c, []byte("x")); err != nil || string(out) != "x" {
			t.Fatalf("exec %d of %d: %q %v", i+1, n, out, err)
		}
	}
	if got := sup.ran.Load(); got != n {
		t.Fatalf("the daemon ran %d commands for %d Execs", got, n)
	}
}

// Issue 24: cleartext TCP off loopback is refused, naming the rule; TLS
// takes a certificate and its key together; a unix socket takes no TLS.
func TestCleartextTCPOnANonLoopbackAddressIsRefused(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(strings.Repeat("k", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	certs := mustCerts(t, dir, "sandboxd")
	// openEndpoint, not run: a broken rule must not start a supervisor.
	for _, c := range []struct {
		o    options
		want string
	}{
		{options{listen: "0.0.0.0:0"}, "--listen 0.0.0.0:0 is cleartext TCP on a non-loopback address"},
		{options{listen: ":0"}, "cleartext TCP on a non-loopback address"},
		{options{listen: "[::]:0"}, "cleartext TCP on a non-loopback address"},
		{options{listen: "127.0.0.1:0", tlsCert: certs.Cert}, "--tls-cert and --tls-key go together"},
		{options{listen: "unix:" + filepath.Join(dir, "s"), tlsCert: certs.Cert, tlsKey: certs.Key}, "--tls-cert is for a TCP --listen"},
	} {
		c.o.tokenFile = tokenFile
		ep, err := openEndpoint(c.o)
		if err == nil {
			ep.ln.Close()
		}
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want bad usage saying %q", c.o, err, c.want)
		}
	}
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		ep, err := openEndpoint(options{listen: listen, tokenFile: tokenFile})
		if err != nil {
			t.Errorf("cleartext on %s (loopback): %v", listen, err)
			continue
		}
		ep.ln.Close()
	}
	ep, err := openEndpoint(options{listen: "0.0.0.0:0", tokenFile: tokenFile, tlsCert: certs.Cert, tlsKey: certs.Key})
	if err != nil {
		t.Fatalf("TLS on 0.0.0.0: %v", err)
	}
	ep.ln.Close()
}
