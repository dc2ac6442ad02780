package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// serve runs s on a loopback port until the test ends and answers its URL.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-served })
	return "http://" + ln.Addr().String()
}

// readAll is a route that reads its body and says how that ended.
func readAll(got chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		got <- err
		fmt.Fprintf(w, "%d %v\n", n, err)
	})
}

// A stalled request body was held for ever: no read deadline on a call
// that is not a stream. Now a body that stops arriving fails the
// handler's read after Timeouts.Read, over HTTP/1.1 and h2c alike.
func TestAStalledBodyIsDroppedAfterTheReadTimeout(t *testing.T) {
	for name, client := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "h2c": h2cClient()} {
		t.Run(name, func(t *testing.T) {
			got := make(chan error, 1)
			s := New(slog.New(slog.DiscardHandler), nil)
			s.SetTimeouts(Timeouts{ReadHeader: time.Second, Read: 200 * time.Millisecond, Idle: time.Minute, PingAfter: time.Minute, PingTimeout: time.Minute})
			s.Handle("POST /slow", readAll(got))
			url := serve(t, s)
			body, stall := io.Pipe()
			defer stall.Close()
			go stall.Write([]byte("the first bytes, then nothing"))
			req, _ := http.NewRequest("POST", url+"/slow", body)
			req.ContentLength = 1 << 10
			go func() {
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			select {
			case err := <-got:
				if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(fmt.Sprint(err), "timeout") {
					t.Fatalf("the stalled body's read ended with %v; want a timeout", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("a stalled body is still being read after 20 s (read timeout 200ms)")
			}
		})
	}
}

// The read deadline bounds the body only: a call that answers after it
// (an operation waited on) is not cut, on HTTP/1.1 (whose background
// read of the connection would cancel the call on a deadline left set)
// and h2c alike.
func TestAnAnswerLongerThanTheReadTimeoutIsNotCut(t *testing.T) {
	for name, client := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "h2c": h2cClient()} {
		t.Run(name, func(t *testing.T) {
			s := New(slog.New(slog.DiscardHandler), nil)
			read := 100 * time.Millisecond
			s.SetTimeouts(Timeouts{ReadHeader: time.Second, Read: read, Idle: time.Minute, PingAfter: time.Minute, PingTimeout: time.Minute})
			s.Handle("POST /long", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
					fmt.Fprintf(w, "cut: %v", r.Context().Err())
				case <-time.After(5 * read): // outlive the deadline
					fmt.Fprint(w, "answered")
				}
			}))
			url := serve(t, s)
			resp, err := client.Post(url+"/long", "text/plain", strings.NewReader("a small body"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "answered" {
				t.Fatalf("a call answering after its body was read: %q", b)
			}
		})
	}
}

// Every route mounted with Handle has a body limit (MaxBody); a stream
// mounted with HandleStream has none.
func TestABodyPastMaxBodyIsRefusedButAStreamsIsNot(t *testing.T) {
	got := make(chan error, 2)
	s := New(slog.New(slog.DiscardHandler), nil)
	s.Handle("POST /call", readAll(got))
	s.HandleStream("POST /stream", readAll(got))
	url := serve(t, s)
	big := strings.Repeat("x", MaxBody+1)
	for path, tooBig := range map[string]bool{"/call": true, "/stream": false} {
		resp, err := h2cClient().Post(url+path, "text/plain", strings.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var mb *http.MaxBytesError
		if err := <-got; errors.As(err, &mb) != tooBig {
			t.Errorf("%s: a body of %d bytes read with %v", path, len(big), err)
		}
	}
}

// There was no cap on connections per client address: one address
// could hold any number open (a slow client's many connections). Now
// one past the cap is closed unread, a place freed is taken again, and a
// trusted proxy's address is not counted.
func TestConnectionsOfOneAddressAreCapped(t *testing.T) {
	s := New(slog.New(slog.DiscardHandler), nil)
	s.SetConnLimit(3, nil)
	addr := strings.TrimPrefix(serve(t, s), "http://")
	var open []net.Conn
	for range 3 {
		c := dialServed(t, addr)
		if c == nil {
			t.Fatal("a connection under the cap was not served")
		}
		open = append(open, c)
	}
	if c := dialServed(t, addr); c != nil {
		t.Fatal("a fourth connection of one address was served (cap 3)")
	}
	open[0].Close()
	wait.Eventually(t, time.Minute, "a place freed by a closed connection given again", func() (bool, string) {
		return dialServed(t, addr) != nil, "the dial is still refused"
	})

	proxied := New(slog.New(slog.DiscardHandler), nil)
	proxied.SetConnLimit(1, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	paddr := strings.TrimPrefix(serve(t, proxied), "http://")
	for i := range 3 {
		if dialServed(t, paddr) == nil {
			t.Fatalf("connection %d of a trusted proxy was refused", i+1)
		}
	}
}

// dialServed opens a connection and asks /healthz on it; it answers the
// connection, left open, when the server answered, nil when it closed it.
func dialServed(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return nil
	}
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("healthz: %q", line)
	}
	return c
}
