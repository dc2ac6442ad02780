//go:build booted

package wire

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	sandboxv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1/sandboxv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// execCounter is a sandboxd that runs every Exec at once: started, then
// exit 0, counting the commands it ran.
type execCounter struct {
	sandboxv1connect.UnimplementedSandboxHandler
	ran atomic.Int64
}

func (e *execCounter) Exec(ctx context.Context, s *connect.BidiStream[sandboxv1.ExecRequest, sandboxv1.ExecResponse]) error {
	if _, err := s.Receive(); err != nil {
		return err
	}
	e.ran.Add(1)
	if err := s.Send(&sandboxv1.ExecResponse{Msg: &sandboxv1.ExecResponse_Started{Started: true}}); err != nil {
		return err
	}
	return s.Send(&sandboxv1.ExecResponse{Msg: &sandboxv1.ExecResponse_Exit{Exit: &sandboxv1.ExitStatus{}}})
}

// fakeDaemon serves fake as a sandboxd on srv (its timeouts and hooks
// set; h2c) on a loopback port until the test ends, and answers the
// address.
func fakeDaemon(t *testing.T, fake sandboxv1connect.SandboxHandler, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(sandboxv1connect.NewSandboxHandler(fake))
	srv.Handler, srv.Protocols = mux, new(http.Protocols)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// CI failed once with "sandboxd exec: http2: Transport: cannot retry err
// [http2: Transport received Server's graceful shutdown GOAWAY] after
// Request.Body was written": the daemon's idle timeout closed the
// connection as an Exec stream crossed it, and the command never ran. Here
// the server's idle timeout is 5 ms and 300 Execs start at every point
// around it (the sleeps are the sweep, nothing is waited on): each
// succeeds, and each runs once.
func TestAnExecCrossingTheServersIdleCloseIsSentAgainAndRunsOnce(t *testing.T) {
	fake := &execCounter{}
	addr := fakeDaemon(t, fake, &http.Server{IdleTimeout: 5 * time.Millisecond})
	c := NewClient(H2CClient("", "", time.Minute), "http://"+addr)
	const n = 300
	for i := range n {
		time.Sleep(time.Duration(i%12) * 500 * time.Microsecond)
		p, err := c.Exec(context.Background(), "m", sandbox.ExecRequest{Args: []string{"true"}})
		if err != nil {
			t.Fatalf("exec %d of %d: %v", i+1, n, err)
		}
		if st, err := p.Wait(); err != nil || st.Code != 0 {
			t.Fatalf("exec %d: %+v %v", i+1, st, err)
		}
	}
	if got := fake.ran.Load(); got != n {
		t.Fatalf("the server ran %d commands for %d Execs", got, n)
	}
}

// The client drops a connection idle for ClientIdle itself, so a daemon
// with a longer idle timeout never closes one under a new call (a call
// crossing the daemon's close failed with "write: broken pipe", which
// cannot be sent again: TestWireExecStreamsExitStatusesAndSilence on a
// loaded host).
func TestTheClientDropsAnIdleConnectionBeforeTheDaemonDoes(t *testing.T) {
	var conns atomic.Int64
	closed := make(chan struct{}, 8)
	addr := fakeDaemon(t, &execCounter{}, &http.Server{IdleTimeout: time.Hour, ConnState: func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}})
	hc := H2CClient("", "", time.Minute)
	if got := hc.Transport.(*http.Transport).IdleConnTimeout; got != ClientIdle {
		t.Fatalf("the client's idle timeout is %s, not ClientIdle", got)
	}
	hc.Transport.(*http.Transport).IdleConnTimeout = 50 * time.Millisecond
	c := NewClient(hc, "http://"+addr)
	run := func() {
		p, err := c.Exec(context.Background(), "m", sandbox.ExecRequest{Args: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	select {
	case <-closed: // the client closed it, the server's timeout an hour away
	case <-time.After(time.Minute):
		t.Fatal("the idle connection was never closed")
	}
	run()
	if got := conns.Load(); got != 2 {
		t.Fatalf("%d connections for two calls with the first closed idle", got)
	}
}
