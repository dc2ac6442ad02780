package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// terminal is rsh's local terminal when --tty asked for one: raw while the
// command runs, restored at every way out, its size sent at each SIGWINCH.
// Without a terminal on stdin (a pipe, a test) the remote one is 24x80 and
// nothing local changes.
type terminal struct {
	fd    int // -1: stdin is no terminal, or no tty was asked for
	mu    sync.Mutex
	saved *term.State
}

func newTerminal(tty bool, stdin io.Reader) *terminal {
	t := &terminal{fd: -1}
	if f, ok := stdin.(*os.File); ok && tty && term.IsTerminal(int(f.Fd())) {
		t.fd = int(f.Fd())
	}
	return t
}

// size is the local terminal's size, 24x80 without one.
func (t *terminal) size() *controlv1.TerminalSize {
	if t.fd >= 0 {
		if cols, rows, err := term.GetSize(t.fd); err == nil && rows > 0 && cols > 0 {
			return &controlv1.TerminalSize{Rows: uint32(rows), Cols: uint32(cols)}
		}
	}
	return &controlv1.TerminalSize{Rows: 24, Cols: 80}
}

// raw puts the local terminal in raw mode: keys, ^C included, go to the
// remote command as bytes.
func (t *terminal) raw() {
	if t.fd < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, err := term.MakeRaw(t.fd); err == nil {
		t.saved = st
	}
}

// restore undoes raw; it may be called more than once.
func (t *terminal) restore() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.saved != nil {
		_ = term.Restore(t.fd, t.saved)
		t.saved = nil
	}
}

// watchResize sends the terminal's size after each SIGWINCH until ctx
// ends. A size of zero (a terminal being set up) is not sent: the api
// refuses it.
func (t *terminal) watchResize(ctx context.Context, send func(*controlv1.TerminalSize) error) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if t.fd < 0 {
				continue
			}
			if cols, rows, err := term.GetSize(t.fd); err == nil && rows > 0 && cols > 0 {
				if send(&controlv1.TerminalSize{Rows: uint32(rows), Cols: uint32(cols)}) != nil {
					return
				}
			}
		}
	}
}

// streamWindow is the HTTP/2 receive window rsh offers (the api's is the
// same, server.Window): Go's default of 1 MiB held a full-duplex stream to
// a few tens of MiB/s.
const streamWindow = 16 << 20

// streamClient speaks HTTP/2 to the endpoint (cleartext for http://, TLS
// for https://), which a bidirectional stream needs. A connection silent for pingAfter is pinged, so a command
// that prints nothing keeps it, and one whose api is gone is found.
func streamClient(endpoint string, pingAfter time.Duration) *http.Client {
	var p http.Protocols
	if strings.HasPrefix(endpoint, "https://") {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	t := &http.Transport{Protocols: &p, Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		HTTP2: &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: pingAfter,
			MaxReceiveBufferPerStream: streamWindow, MaxReceiveBufferPerConnection: streamWindow}}
	return &http.Client{Transport: t}
}
