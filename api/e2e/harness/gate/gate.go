// Package gate holds a test's box supervisor at its Create (Gate), so an
// api's operations pile up in the api without a boot each, or at any one
// step (Step), so a test kills the api there; Serve serves a supervisor
// over the sandboxd protocol on a unix socket for an api to drive.
// Apart from package harness: wire's own tests use harness, and this uses wire.
package gate

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
)

// Gate is a box supervisor that holds every Create until Open and passes
// every other call, and each Create once let through, to the supervisor
// it wraps. A test piles operations up in an api (they wait in the api,
// not in a boot) and reads how many reached the supervisor at once.
type Gate struct {
	sandbox.Supervisor
	open chan struct{}
	once sync.Once

	mu         sync.Mutex
	held, most int
}

// New wraps sup with its gate shut.
func New(sup sandbox.Supervisor) *Gate {
	return &Gate{Supervisor: sup, open: make(chan struct{})}
}

// Create waits for Open (or ctx's end: the api that called went away)
// and then creates on the wrapped supervisor.
func (g *Gate) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Machine, error) {
	g.mu.Lock()
	g.held++
	g.most = max(g.most, g.held)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.held--
		g.mu.Unlock()
	}()
	select {
	case <-g.open:
	case <-ctx.Done():
		return sandbox.Machine{}, ctx.Err()
	}
	return g.Supervisor.Create(ctx, spec)
}

// Open lets every Create through, now and from now on.
func (g *Gate) Open() { g.once.Do(func() { close(g.open) }) }

// Held answers how many Creates wait at the gate now, and the most that
// ever waited at once.
func (g *Gate) Held() (now, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.most
}

// Serve answers sup's calls over the sandboxd protocol (package wire,
// cleartext HTTP/2) on a unix socket at path, as cocoonbox-sandboxd
// does, so a cocoonbox-api configured with sandbox.hosts {NAME:
// "unix:PATH"} drives it. stop closes the listener and every call.
func Serve(sup sandbox.Supervisor, path string) (stop func(), err error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(wire.NewHandler(sup))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second,
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: wire.Window, MaxReceiveBufferPerConnection: wire.Window}}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}
