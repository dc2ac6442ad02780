package toolrequest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// relayEndpointChild (TestMain calls it first) is the endpoint of another uid that
// TestRelayRefusesAnotherPeer starts: it listens on the socket named,
// says "ready", answers two connections with "{}" and exits.
func relayEndpointChild() {
	if path := os.Getenv("BRANCHBOX_RELAY_TEST_LISTEN"); path != "" {
		l, err := net.Listen("unix", path)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ready")
		for range 2 {
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			io.ReadAll(c)
			c.Write([]byte("{}\n"))
			c.Close()
		}
		os.Exit(0)
	}
}

// endpoint serves one connection on a real Unix socket: it reads the
// request to EOF (so a missing write-side EOF hangs it), hands it to
// seen, and answers with reply (nil: never answers, holds the line until
// the test's cleanup).
func endpoint(t *testing.T, reply []byte, seen chan<- []byte) Endpoint {
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
	return at(t, path)
}

// at is the endpoint at path as it is now.
func at(t *testing.T, path string) Endpoint {
	t.Helper()
	ep, err := endpointAt(path)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestRelayOneFrame: the endpoint sees exactly the frame and a newline,
// then EOF; its line comes back without the newline.
func TestRelayOneFrame(t *testing.T) {
	seen := make(chan []byte, 1)
	ep := endpoint(t, []byte("{\"ok\":true}\n"), seen)
	got, err := relayFrame(context.Background(), ep, []byte(`{"req":1}`), 5*time.Second)
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("relay: %q %v", got, err)
	}
	if s := <-seen; string(s) != "{\"req\":1}\n" {
		t.Fatalf("endpoint saw %q", s)
	}
}

// TestRelayFailures: transport failures (no endpoint, an endpoint that
// never answers, time-bounded) wrap errTransport; framing failures are
// terminal by rule relay-framing.
func TestRelayFailures(t *testing.T) {
	t.Run("no endpoint", func(t *testing.T) {
		_, err := relayFrame(context.Background(), Endpoint{Path: filepath.Join(t.TempDir(), "none.sock")}, []byte(`{}`), time.Second)
		if !errors.Is(err, errTransport) {
			t.Fatalf("got %v", err)
		}
	})
	// The endpoint holds the line until cleanup, so relayFrame returning at
	// all is its own bound at work (and the error says so).
	t.Run("never answers", func(t *testing.T) {
		_, err := relayFrame(context.Background(), endpoint(t, nil, make(chan []byte, 1)), []byte(`{}`), 300*time.Millisecond)
		if !errors.Is(err, errTransport) || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("got %v, want a transport timeout", err)
		}
	})
	for name, reply := range map[string][]byte{
		"no newline": []byte(`{"ok":true}`),
		"too large":  append(bytes.Repeat([]byte("x"), 256<<10+1), '\n'),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := relayFrame(context.Background(), endpoint(t, reply, make(chan []byte, 1)), []byte(`{}`), 5*time.Second)
			if branchbox.RuleOf(err) != branchbox.RuleFraming || errors.Is(err, errTransport) {
				t.Fatalf("got %v, want rule %s", err, branchbox.RuleFraming)
			}
		})
	}
	t.Run("newline in the request", func(t *testing.T) {
		_, err := relayFrame(context.Background(), Endpoint{Path: "/nonexistent"}, []byte("{}\n{}"), time.Second)
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
		got, err := relayFrame(context.Background(), endpoint(t, append(append([]byte(nil), want...), '\n'), make(chan []byte, 1)), []byte(`{}`), 10*time.Second)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("a %d-byte answer: %d bytes back, equal %v, %v", n, len(got), bytes.Equal(got, want), err)
		}
	}
}

// TestRelayDialsTheRecordedSocketOnly (no time of check to time of use):
// the endpoint path swapped for a symlink to another live socket, or
// replaced by another socket, is refused terminally (rule
// source-ownership-or-type) and the other socket never hears the frame
// (the dispatcher dialled by name, so a swapped-in symlink received the
// capability); a peer that is neither the run's owner nor root is
// refused after connect (SO_PEERCRED).
func TestRelayDialsTheRecordedSocketOnly(t *testing.T) {
	seen := make(chan []byte, 1)
	ep := endpoint(t, []byte("{}\n"), seen)
	thief := make(chan []byte, 1)
	other := endpoint(t, []byte("{}\n"), thief)
	for name, swap := range map[string]func(string) error{
		"a symlink to another socket": func(p string) error { return os.Symlink(other.Path, p) },
		"another socket":              func(p string) error { return os.Link(other.Path, p) },
	} {
		t.Run(name, func(t *testing.T) {
			moved := ep.Path + ".orig"
			if err := os.Rename(ep.Path, moved); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(moved, ep.Path)
			if err := swap(ep.Path); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(ep.Path)
			_, err := relayFrame(context.Background(), ep, []byte(`{"capability":"x"}`), 5*time.Second)
			if branchbox.RuleOf(err) != branchbox.RuleSourceType || errors.Is(err, errTransport) {
				t.Fatalf("got %v, want the terminal rule %s", err, branchbox.RuleSourceType)
			}
		})
	}
	select {
	case f := <-thief:
		t.Fatalf("the swapped-in socket received %q", f)
	default:
	}
	// The recorded socket itself, answered by root, still works; a
	// record saying another owner, answered by root, is root: accepted.
	if _, err := relayFrame(context.Background(), ep, []byte(`{}`), 5*time.Second); err != nil {
		t.Fatalf("the recorded socket: %v", err)
	}
	<-seen
}

// TestRelayRefusesAnotherPeer: a socket answered by a process of another
// uid than the run's owner (and not root) is refused after connect, by
// its SO_PEERCRED, terminally.
func TestRelayRefusesAnotherPeer(t *testing.T) {
	testenv.RequireRoot(t, "the endpoint runs as another uid")
	dir, err := os.MkdirTemp("", "bbr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := os.Chown(dir, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "e.sock")
	// A listener of uid 1001: this test binary again (TestMain), serving
	// one connection.
	// (a copy uid 1001 can run: the build directory is root's 0700).
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "relay.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"BRANCHBOX_RELAY_TEST_LISTEN=" + path}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1001, Gid: 1001}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the endpoint of uid 1001: %q %v", line, err)
	}
	ep := at(t, path)
	ep.Owner = 10001
	_, err = relayFrame(context.Background(), ep, []byte(`{}`), 5*time.Second)
	if branchbox.RuleOf(err) != branchbox.RuleSourceType || !strings.Contains(err.Error(), "answered by uid 1001") {
		t.Fatalf("got %v, want the peer refused", err)
	}
	// The same endpoint recorded as the owner's is accepted.
	ep.Owner = 1001
	if _, err := relayFrame(context.Background(), ep, []byte(`{}`), 5*time.Second); err != nil {
		t.Fatalf("the owner's endpoint: %v", err)
	}
}
