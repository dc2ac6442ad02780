package branchboxtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Endpoint is a test tool endpoint on a real Unix socket: it reads each
// frame to EOF (so a relay without write-side EOF hangs it), counts it,
// and answers as SetAnswer says (by default Correlated, with a newline).
type Endpoint struct {
	Path string
	mu   sync.Mutex
	// frames are every frame received, in order.
	frames [][]byte
	// Got receives the first 64 frames as they arrive.
	Got    chan []byte
	answer func(frame []byte) []byte
	done   chan struct{}
}

// NewEndpoint listens on a new socket (its path short enough for a Unix
// socket), removed at cleanup.
func NewEndpoint(t testing.TB) *Endpoint {
	t.Helper()
	dir, err := os.MkdirTemp("", "bbe-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "endpoint.sock"))
	must(t, err)
	return Serve(t, l)
}

// Serve answers on l (a run's live endpoint socket, say) until cleanup.
func Serve(t testing.TB, l net.Listener) *Endpoint {
	e := &Endpoint{Path: l.Addr().String(), Got: make(chan []byte, 64), done: make(chan struct{})}
	t.Cleanup(func() { close(e.done); l.Close() })
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

// SetAnswer makes answer(frame) the reply to each frame from now on (nil
// from it: none, the connection closed).
func (e *Endpoint) SetAnswer(answer func(frame []byte) []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = answer
}

// Hold is an answer that never comes: the connection stays open until the
// test ends.
func (e *Endpoint) Hold([]byte) []byte { <-e.done; return nil }

func (e *Endpoint) serve(c net.Conn) {
	defer c.Close()
	frame, _ := io.ReadAll(c)
	e.mu.Lock()
	e.frames = append(e.frames, frame)
	answer := e.answer
	e.mu.Unlock()
	select {
	case e.Got <- frame:
	default: // a benchmark reads none
	}
	if answer != nil {
		if out := answer(frame); out != nil {
			c.Write(out)
		}
		return
	}
	c.Write(append(Correlated(frame), '\n'))
}

// Correlated is a trusted endpoint's answer to frame: the request's ids
// without the capability, and its payload back as {"echo": ...}.
func Correlated(frame []byte) []byte {
	var req map[string]json.RawMessage
	json.Unmarshal(frame, &req)
	delete(req, "capability")
	req["payload"] = json.RawMessage(`{"echo":` + string(req["payload"]) + `}`)
	// As an endpoint in another language writes it: '&', '<' and '>'
	// as they are (json.Marshal's \u0026 would hide a record that is not
	// byte-exact).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(req)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Count is how many frames arrived.
func (e *Endpoint) Count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.frames)
}
