package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// closedByProxy fails the test unless reading c ends because the proxy
// closed it (not at the safety deadline, which is far above any limit
// the tests configure: it only keeps a broken proxy from hanging them).
func closedByProxy(t *testing.T, c net.Conn, r io.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := io.Copy(io.Discard, r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the intercepted connection was still open a minute later")
	}
}

// Issue 37: "the intercepted server has no idle timeout". An intercepted
// HTTP/1.1 connection that carried one request and then nothing is
// closed by the proxy after InterceptIdle.
func TestAnInterceptedConnectionIsClosedWhenIdle(t *testing.T) {
	ts, _ := upstream(t)
	_, proxy, trust := interceptProxy(t, ts, Config{InterceptIdle: 50 * time.Millisecond})
	dest := fmt.Sprintf("example.com:%d", ts.Listener.Addr().(*net.TCPAddr).Port)
	tc := interceptedConn(t, proxy, dest, "example.com", trust, "http/1.1")
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", dest)
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("the request: %d, close %v", resp.StatusCode, resp.Close)
	}
	closedByProxy(t, tc, br)
}

// Issue 37: an intercepted connection lives InterceptMax at most, even
// busy: an HTTP/2 answer the upstream never ends is cut (the box's read
// fails) and the upstream's request is cancelled, although the idle limit
// is far away.
func TestAnInterceptedConnectionIsClosedAtItsTotalLimit(t *testing.T) {
	cancelled := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, "streaming")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	_, proxy, trust := interceptProxy(t, ts, Config{InterceptIdle: time.Hour, InterceptMax: 200 * time.Millisecond})
	c, _ := client(t, proxy, trust, true)
	resp, err := c.Get(fmt.Sprintf("https://example.com:%d/", ts.Listener.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the box spoke %s", resp.Proto)
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the endless answer ended cleanly: want the connection cut")
		}
	case <-time.After(time.Minute):
		t.Fatal("the busy intercepted connection was still open a minute later")
	}
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatal("the upstream's request was not cancelled")
	}
}
