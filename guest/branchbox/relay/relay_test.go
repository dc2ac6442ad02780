package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// endpoint serves one connection on a real Unix socket: it reads the
// request to EOF (so a missing write-side EOF hangs it), hands it to
// seen, and answers with reply (nil: never answers, holds the line until
// the test's cleanup).
func endpoint(t *testing.T, reply []byte, seen chan<- []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "endpoint.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c)
		seen <- got
		if reply == nil {
			<-done
			return
		}
		_, _ = c.Write(reply)
	}()
	return path
}

// TestRelayOneFrame: the endpoint sees exactly the frame and a newline,
// then EOF; its line comes back without the newline.
func TestRelayOneFrame(t *testing.T) {
	seen := make(chan []byte, 1)
	path := endpoint(t, []byte("{\"ok\":true}\n"), seen)
	got, err := Relay(context.Background(), path, []byte(`{"req":1}`), 5*time.Second)
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("relay: %q %v", got, err)
	}
	if s := <-seen; string(s) != "{\"req\":1}\n" {
		t.Fatalf("endpoint saw %q", s)
	}
}

// TestRelayFailures: transport failures (no endpoint, an endpoint that
// never answers, time-bounded) wrap ErrTransport; framing failures are
// terminal by rule relay-framing.
func TestRelayFailures(t *testing.T) {
	t.Run("no endpoint", func(t *testing.T) {
		_, err := Relay(context.Background(), filepath.Join(t.TempDir(), "none.sock"), []byte(`{}`), time.Second)
		if !errors.Is(err, ErrTransport) {
			t.Fatalf("got %v", err)
		}
	})
	// The endpoint holds the line until cleanup, so Relay returning at
	// all is its own bound at work (and the error says so).
	t.Run("never answers", func(t *testing.T) {
		_, err := Relay(context.Background(), endpoint(t, nil, make(chan []byte, 1)), []byte(`{}`), 300*time.Millisecond)
		if !errors.Is(err, ErrTransport) || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("got %v, want a transport timeout", err)
		}
	})
	for name, reply := range map[string][]byte{
		"no newline": []byte(`{"ok":true}`),
		"too large":  append(bytes.Repeat([]byte("x"), 256<<10+1), '\n'),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Relay(context.Background(), endpoint(t, reply, make(chan []byte, 1)), []byte(`{}`), 5*time.Second)
			if branchbox.RuleOf(err) != branchbox.RuleFraming || errors.Is(err, ErrTransport) {
				t.Fatalf("got %v, want rule %s", err, branchbox.RuleFraming)
			}
		})
	}
	t.Run("newline in the request", func(t *testing.T) {
		_, err := Relay(context.Background(), "/nonexistent", []byte("{}\n{}"), time.Second)
		if branchbox.RuleOf(err) != branchbox.RuleFraming || !strings.Contains(err.Error(), "newline") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestRelayAnswersOver64KiBByteExact: an answer larger than the reader's
// 64 KiB buffer, up to the 256 KiB bound, comes back byte for byte (the
// buffer was overwritten before its first chunk was copied, so every
// answer over 64 KiB came back corrupt and the dispatch failed for good).
func TestRelayAnswersOver64KiBByteExact(t *testing.T) {
	for _, n := range []int{64<<10 - 1, 64 << 10, 64<<10 + 1, 100 << 10, 128 << 10, 200 << 10, 256 << 10} {
		// Every 8 bytes differ, so a chunk copied twice shows.
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "%07x,", i)
		}
		want := []byte(b.String()[:n])
		got, err := Relay(context.Background(), endpoint(t, append(append([]byte(nil), want...), '\n'), make(chan []byte, 1)), []byte(`{}`), 10*time.Second)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("a %d-byte answer: %d bytes back, equal %v, %v", n, len(got), bytes.Equal(got, want), err)
		}
	}
}
