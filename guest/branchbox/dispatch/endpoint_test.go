package dispatch

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/envelope"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/spool"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

const (
	consumer   = 1000
	capability = "endpoint-only-random-value"
)

// endpoint is a test tool endpoint on a real Unix socket: it reads each
// frame to EOF, counts it, and answers as answer says (nil: a correlated
// response echoing the payload).
type endpoint struct {
	path   string
	mu     sync.Mutex
	frames [][]byte
	// got receives the first 64 frames as they arrive.
	got    chan []byte
	answer func(frame []byte) []byte
	done   chan struct{}
}

// hold is an answer that never comes: the connection stays open until
// the test ends.
func (e *endpoint) hold([]byte) []byte { <-e.done; return nil }

func newEndpoint(t testing.TB, answer func([]byte) []byte) *endpoint {
	t.Helper()
	dir, err := os.MkdirTemp("", "bbe-") // a socket path fits in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{path: filepath.Join(dir, "endpoint.sock"), got: make(chan []byte, 64), answer: answer, done: make(chan struct{})}
	l, err := net.Listen("unix", e.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(e.done); l.Close(); os.RemoveAll(dir) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go e.serve(c)
		}
	}()
	return e
}

func (e *endpoint) serve(c net.Conn) {
	defer c.Close()
	frame, _ := io.ReadAll(c)
	e.mu.Lock()
	e.frames = append(e.frames, frame)
	e.mu.Unlock()
	select {
	case e.got <- frame:
	default: // a benchmark reads none
	}
	if e.answer != nil {
		if out := e.answer(frame); out != nil {
			c.Write(out)
		}
		return
	}
	c.Write(append(correlated(frame), '\n'))
}

// correlated is the endpoint's answer to frame: its ids, and its payload
// back as {"echo": ...}.
func correlated(frame []byte) []byte {
	var req map[string]json.RawMessage
	json.Unmarshal(frame, &req)
	delete(req, "capability")
	req["payload"] = json.RawMessage(`{"echo":` + string(req["payload"]) + `}`)
	out, _ := json.Marshal(req)
	return out
}

func (e *endpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.frames)
}

// testSpool lays out an initialized spool (spool.Init) and its replay
// ledger under fresh directories, for an endpoint at sock.
func testSpool(t testing.TB, sock, policy string) *Spool {
	t.Helper()
	testenv.RequireRoot(t, "request files are the consumer UID's")
	dir := filepath.Join(branchboxtest.Dir0755(t), "volume")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := spool.Binding{RunID: "run-demo", LeaseID: "delivery_requests", Consumer: "coding-agent", ConsumerUID: consumer}
	if err := spool.Init(dir, b, []byte(capability)); err != nil {
		t.Fatal(err)
	}
	return &Spool{Dir: dir, ConsumerUID: consumer, Endpoint: sock, Policy: policy,
		Ledger: filepath.Join(t.TempDir(), "state", "run-demo", "replay", "delivery_requests"), RelayTimeout: 5 * time.Second,
		Binding: envelope.Binding{RunID: "run-demo", LeaseID: "delivery_requests", Consumer: "coding-agent", Capability: []byte(capability)}}
}

// request is a valid envelope for id with payload.
func request(id, payload string) []byte {
	return []byte(`{"version":"1","run_id":"run-demo","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"` + id +
		`","capability":"` + capability + `","payload":` + payload + `}`)
}

// write finalizes requests/<id>.json as the consumer does: mode 0600, its
// UID, renamed into place.
func write(t testing.TB, s *Spool, id string, body []byte) string {
	t.Helper()
	tmp := filepath.Join(s.Dir, spool.RequestsDir, "."+id+".tmp")
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, consumer, consumer); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Dir, spool.RequestsDir, id+".json")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// responses lists responses/ (what the consumer could take as an answer).
func responses(t *testing.T, s *Spool) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Dir, spool.ResponsesDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
