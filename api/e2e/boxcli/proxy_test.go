//go:build booted

package boxcli

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy relays TCP to the api, so a test can lose the api's answers:
// Hold stops relaying what the api sends (it is kept back, not dropped),
// Cut closes every connection open now, as a network that fails does, and
// lets new ones through again.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cond  *sync.Cond
	held  bool
	conns map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// URL is the proxy's endpoint for the CLI.
func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp4", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go p.down(up, c)
	}
}

// down relays the api's bytes to the client, waiting while held.
func (p *cutProxy) down(up, c net.Conn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held && p.conns[c] {
				p.cond.Wait()
			}
			open := p.conns[c]
			p.mu.Unlock()
			if !open {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Hold keeps back whatever the api sends from now on, until Cut.
func (p *cutProxy) Hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// Cut closes every open connection (what was held is lost) and relays
// new ones as they come.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.held = false
	p.cond.Broadcast()
}
