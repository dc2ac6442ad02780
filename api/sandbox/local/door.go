package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Door is the supervisor's one way into a booted box: commands (exec, and
// through them files) and TCP connections to the box's loopback. Here it
// is nsenter into the box's namespaces; a microVM supervisor would offer
// the same two calls over vsock (github.com/mdlayher/vsock) to an agent in
// the guest, so nothing above this interface knows which it is.
type Door interface {
	// Start starts a command in the box as its own process: it counts
	// against the box (its cgroup), freezes with it, and is reaped by the
	// box when it leaves children behind.
	Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error)
	// Dial connects to 127.0.0.1:port inside the box.
	Dial(ctx context.Context, port int) (net.Conn, error)
}

// nsenterDoor enters a box through its leader's namespaces.
type nsenterDoor struct {
	leader   int
	netns    string   // the box's network namespace file
	payloads []string // the box's payload cgroups
}

// baseEnv is what every command starts with: nothing of the supervisor's
// environment leaks into a box.
var baseEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"LANG=C.UTF-8",
}

func (d *nsenterDoor) command(req sandbox.ExecRequest) []string {
	env := append([]string{}, baseEnv...)
	home := "/root"
	if req.User != "" {
		home = ""
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	term := "TERM=dumb"
	if req.TTY != nil {
		term = "TERM=xterm-256color"
	}
	env = append(env, term)
	env = append(env, req.Env...)
	args := []string{"nsenter", "-t", strconv.Itoa(d.leader), "-a", "--", "env", "-i"}
	if req.Dir != "" {
		args = append(args, "-C", req.Dir)
	}
	args = append(args, env...)
	switch {
	case req.Login:
		args = append(args, "runuser", "-l", req.User, "-c", strings.Join(req.Args, " "))
	case req.User != "":
		args = append(args, "runuser", "-u", req.User, "--")
		args = append(args, req.Args...)
	default:
		args = append(args, req.Args...)
	}
	return args
}

// Start implements Door.
func (d *nsenterDoor) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	// Into the box's payload cgroups first: a plain nsenter would leave the
	// command in the supervisor's cgroup, not frozen with the box, and an
	// orphan of it would hold the box's shutdown for 10 s.
	args := d.command(req)
	cmd := nspawn.JoinCommand(d.payloads, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, args[0], args[1:]...)
	p := &process{cmd: cmd, done: make(chan struct{})}
	var err error
	if req.TTY != nil {
		err = p.startTTY(*req.TTY)
	} else {
		err = p.startPipes()
	}
	if err != nil {
		// Nothing of the command's text: its words may be secrets
		// (GH_TOKEN=ghp_… as one word), and the api logs this error.
		return nil, fmt.Errorf("start the command (%d words): %w", len(req.Args), err)
	}
	go func() {
		select {
		case <-ctx.Done():
			p.kill()
		case <-p.done:
		}
	}()
	return p, nil
}

// Dial implements Door: the socket is made on a thread that entered the
// box's network namespace. That thread stays locked and ends with its
// goroutine, so no other goroutine ever runs in the box's namespace.
func (d *nsenterDoor) Dial(ctx context.Context, port int) (net.Conn, error) {
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

// process is a command started through nsenter.
type process struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr io.Reader
	tty            *os.File // the pty's master side, nil without a TTY
	done           chan struct{}
	once           sync.Once
	status         sandbox.ExitStatus
	err            error
}

func (p *process) startPipes() error {
	var err error
	// Its own process group: a cancel kills nsenter and what it runs in the
	// box together (kill(-pgid) reaches across PID namespaces).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		return err
	}
	if p.stderr, err = p.cmd.StderrPipe(); err != nil {
		return err
	}
	return p.cmd.Start()
}

func (p *process) startTTY(size sandbox.WindowSize) error {
	master, slave, err := pty.Open()
	if err != nil {
		return fmt.Errorf("open a pty: %w", err)
	}
	defer slave.Close()
	if err := pty.Setsize(master, &pty.Winsize{Rows: size.Rows, Cols: size.Cols}); err != nil {
		master.Close()
		return err
	}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = slave, slave, slave
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := p.cmd.Start(); err != nil {
		master.Close()
		return err
	}
	p.tty = master
	p.stdin = ttyStdin{master}
	p.stdout = ttyReader{master}
	p.stderr = strings.NewReader("")
	return nil
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

func (p *process) Stdin() io.WriteCloser { return p.stdin }
func (p *process) Stdout() io.Reader     { return p.stdout }
func (p *process) Stderr() io.Reader     { return p.stderr }

func (p *process) Resize(_ context.Context, size sandbox.WindowSize) error {
	if p.tty == nil {
		return sandbox.Invalid("tty.size", "the command has no terminal to resize")
	}
	if err := size.Check(); err != nil {
		return err
	}
	return pty.Setsize(p.tty, &pty.Winsize{Rows: size.Rows, Cols: size.Cols})
}

func (p *process) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (p *process) Wait() (sandbox.ExitStatus, error) {
	p.once.Do(func() {
		err := p.cmd.Wait()
		close(p.done)
		if p.tty != nil {
			p.tty.Close()
		}
		ps := p.cmd.ProcessState
		switch {
		case ps == nil:
			p.err = err
		case ps.Exited():
			p.status.Code = ps.ExitCode()
		default:
			ws := ps.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				p.status = sandbox.ExitStatus{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
			} else {
				p.err = err
			}
		}
	})
	return p.status, p.err
}
