package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
)

type running struct {
	url    string
	log    *syncbuf.Buffer
	stop   context.CancelFunc
	served chan error
}

func start(t *testing.T, health func(context.Context) error, mount func(*Server)) *running {
	t.Helper()
	logs := &syncbuf.Buffer{}
	s := New(slog.New(slog.NewTextHandler(logs, nil)), health)
	if mount != nil {
		mount(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &running{url: "http://" + ln.Addr().String(), log: logs, stop: stop, served: make(chan error, 1)}
	go func() { r.served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		<-r.served
	})
	return r
}

func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

func TestOneListenerServesHTTP1AndH2C(t *testing.T) {
	r := start(t, nil, nil)
	for client, want := range map[*http.Client]string{http.DefaultClient: "HTTP/1.1", h2cClient(): "HTTP/2.0"} {
		resp, err := client.Get(r.url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok\n" || resp.Proto != want {
			t.Fatalf("%s: %s %q over %s", want, resp.Status, body, resp.Proto)
		}
	}
}

func TestHealthzAnswers503WhenTheDatabaseDoesNot(t *testing.T) {
	r := start(t, func(context.Context) error { return errors.New("database: connection refused") }, nil)
	resp, err := http.Get(r.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "connection refused") {
		t.Fatalf("%s %q", resp.Status, body)
	}
}

func TestRequestLogHasIDUserAndNoSecret(t *testing.T) {
	r := start(t, nil, func(s *Server) {
		s.Handle("GET /who", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			SetUser(req.Context(), "u-42")
			w.Write([]byte(RequestID(req.Context())))
		}))
	})
	req, _ := http.NewRequest("GET", r.url+"/who?code=secret-code", nil)
	req.Header.Set("Authorization", "Bearer cb_secret-bearer")
	req.Header.Set("Cookie", "cb_session=secret-cookie")
	req.Header.Set(RequestIDHeader, "client-id-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "client-id-1" || resp.Header.Get(RequestIDHeader) != "client-id-1" {
		t.Fatalf("request id in handler %q, echoed %q; want the client's", body, resp.Header.Get(RequestIDHeader))
	}
	logs := r.log.String()
	for _, want := range []string{"id=client-id-1", "path=/who", "status=200", "user=u-42"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "secret") {
		t.Errorf("log prints a secret:\n%s", logs)
	}
	// An id that is not a plain token is replaced.
	req.Header.Set(RequestIDHeader, "bad id\twith spaces")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(RequestIDHeader); len(got) != 16 {
		t.Fatalf("a bad client id was kept or not replaced: %q", got)
	}
}

// Operations: shutdown ends open streams, and Serve returns.
func TestShutdownEndsAnOpenStream(t *testing.T) {
	ended := make(chan struct{})
	r := start(t, nil, func(s *Server) {
		s.Handle("GET /stream", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			defer close(ended)
			w.Write([]byte("first\n"))
			w.(http.Flusher).Flush()
			<-req.Context().Done()
		}))
	})
	resp, err := h2cClient().Get(r.url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	r.stop()
	select {
	case <-ended:
	case <-time.After(ShutdownGrace / 2):
		t.Fatal("the open stream's handler did not end at shutdown")
	}
	if err := <-r.served; err != nil {
		t.Fatalf("Serve after shutdown: %v", err)
	}
	r.served <- nil // for the cleanup
	if _, err := io.ReadAll(resp.Body); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Logf("stream ended with %v", err)
	}
}
