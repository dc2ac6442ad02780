package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"golang.org/x/sys/unix"
)

// Door is the supervisor's one way into a booted box: commands (exec, and
// through them files) and TCP connections to the box's loopback. Here
// commands are transient units of the box's own systemd (unitdoor.go) and
// connections are made in the box's network namespace; a microVM
// supervisor would offer the same two calls over vsock
// (github.com/mdlayher/vsock) to an agent in the guest, so nothing above
// this interface knows which it is.
type Door interface {
	// Start starts a command in the box as its own process: it counts
	// against the box (its cgroup), freezes with it, and is reaped by the
	// box when it leaves children behind.
	Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error)
	// Dial connects to 127.0.0.1:port inside the box.
	Dial(ctx context.Context, port int) (net.Conn, error)
}

// baseEnv is what every command starts with: nothing of the supervisor's
// environment leaks into a box.
var baseEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"LANG=C.UTF-8",
}

// Dial implements Door: the socket is made on a thread that entered the
// box's network namespace. That thread stays locked and ends with its
// goroutine, so no other goroutine ever runs in the box's namespace.
func (d *unitDoor) Dial(ctx context.Context, port int) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(d.netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{nil, fmt.Errorf("open %s: %w", d.netns, err)}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns %s: %w", d.netns, err)}
			return
		}
		var dialer net.Dialer
		c, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// ttyReader turns the EIO a pty master reads once the last slave is closed
// into the end of the stream.
type ttyReader struct{ f *os.File }

func (r ttyReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if errors.Is(err, syscall.EIO) {
		return n, io.EOF
	}
	return n, err
}

// ttyStdin's Close types ^D, the end of input on a terminal; closing the
// master would end the output too.
type ttyStdin struct{ f *os.File }

func (w ttyStdin) Write(b []byte) (int, error) { return w.f.Write(b) }
func (w ttyStdin) Close() error {
	_, err := w.f.Write([]byte{4})
	return err
}
