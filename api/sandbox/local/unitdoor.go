package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// unitDoor starts every command as a transient service of the box's own
// systemd, asked over the box's system bus (as `systemd-run --machine`
// does through machined): so a command the supervisor runs into a box has
// exactly the rights of one the box's systemd starts for itself, its user
// namespace, cgroup, capability bounding set and seccomp filter (issue 37,
// Deliver 2), and nothing of the supervisor's. An nsenter'd command kept
// the supervisor's whole bounding set and no filter, and `sudo` in its
// tree was that much more than the box's root.
//
// The bus is the box's dbus-daemon at /run/dbus/system_bus_socket,
// reached through the leader's root and connected from a thread of the
// supervisor whose ids are the box's root (the range's base): the daemon
// reads the peer's credentials at connect(2), maps them into the box's
// user namespace, and so knows the supervisor as the box's root, whom
// the box's systemd lets start units. (systemd's own private socket would
// need a connecting process the box's PID namespace can see.) Nothing
// runs in the box but the command: the supervisor is the bus client.
type unitDoor struct {
	leader int
	base   uint32 // the box's uid range: its root as the host sees it
	netns  string // the box's network namespace file, for Dial

	mu  sync.Mutex
	bus *boxBus // nil until the first Start, and after its connection ended
}

type unitProperty struct {
	Name  string
	Value dbus.Variant
}

// unitExec is an ExecStartEx entry: no-env-expand, since systemd would
// otherwise read $ in the command's words as its own variables.
type unitExec struct {
	Path  string
	Args  []string
	Flags []string
}

// Start implements Door.
func (d *unitDoor) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	p, err := d.start(ctx, req)
	if err != nil {
		// Nothing of the command's text: its words may be secrets
		// (GH_TOKEN=ghp_… as one word), and the api logs this error.
		return nil, fmt.Errorf("start the command (%d words): %w", len(req.Args), err)
	}
	return p, nil
}

func (d *unitDoor) start(ctx context.Context, req sandbox.ExecRequest) (*unitProcess, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	name := "cocoonbox-door-" + hex.EncodeToString(rnd[:]) + ".service"
	p := &unitProcess{name: name, path: unitPath(name), watch: newUnitWatch(), done: make(chan struct{})}
	argv := doorCommand(req)
	// KillMode=process: what the command leaves running on purpose
	// (setsid -f, a tmux server) outlives it as it would a login.
	// RemainAfterExit: the unit stays, active (exited) or failed, until
	// its status is read and the door lets it go (an ended unit is
	// collected at once, and a read after that sees an empty one: exit 0
	// for any command). No LogLevelMax: it would drop what the command
	// itself logs too (systemd-cat at info), so the box's journal has
	// systemd's start and end lines of each command, as for systemd-run.
	props := []unitProperty{
		{"Description", dbus.MakeVariant("cocoonbox: a command from the supervisor")},
		{"ExecStartEx", dbus.MakeVariant([]unitExec{{Path: "/usr/bin/env", Args: argv, Flags: []string{"no-env-expand"}}})},
		{"Type", dbus.MakeVariant("exec")},
		{"KillMode", dbus.MakeVariant("process")},
		{"RemainAfterExit", dbus.MakeVariant(true)},
	}
	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	if req.TTY != nil {
		tty, slave, n, err := d.openPTY(*req.TTY)
		if err != nil {
			return nil, err
		}
		p.tty, p.slave = tty, slave
		p.stdin = ttyStdin{tty}
		p.stdout = ttyReader{tty}
		p.stderr = strings.NewReader("")
		props = append(props,
			unitProperty{"TTYPath", dbus.MakeVariant("/dev/pts/" + strconv.Itoa(n))},
			unitProperty{"StandardInput", dbus.MakeVariant("tty")},
			unitProperty{"StandardOutput", dbus.MakeVariant("tty")},
			unitProperty{"StandardError", dbus.MakeVariant("tty")})
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			return nil, err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			inR.Close()
			inW.Close()
			outR.Close()
			outW.Close()
			return nil, err
		}
		closeAfter = append(closeAfter, inR, outW, errW)
		p.stdin, p.stdout, p.stderr = inW, outR, errR
		p.pipes = []*os.File{inW, outR, errR}
		props = append(props,
			unitProperty{"StandardInputFileDescriptor", dbus.MakeVariant(dbus.UnixFD(inR.Fd()))},
			unitProperty{"StandardOutputFileDescriptor", dbus.MakeVariant(dbus.UnixFD(outW.Fd()))},
			unitProperty{"StandardErrorFileDescriptor", dbus.MakeVariant(dbus.UnixFD(errW.Fd()))})
	}
	var err error
	for {
		if p.bus, err = d.busFor(ctx); err != nil {
			break
		}
		p.bus.mu.Lock()
		p.bus.waiters[p.path] = p.watch
		p.bus.mu.Unlock()
		obj := p.bus.conn.Object(systemdName, systemdPath)
		// Subscribed once per connection: the box's systemd sends the
		// units' changes only while some client is. Early in a boot it is
		// not on the bus yet, so this is where that shows.
		var job dbus.ObjectPath
		if err = p.bus.subscribe(ctx); err == nil {
			err = obj.CallWithContext(ctx, managerIf+".StartTransientUnit", 0, name, "fail", props, []struct {
				Name  string
				Props []unitProperty
			}{}).Store(&job)
		}
		if err == nil {
			p.startJob = job
			break
		}
		p.unwatch()
		// Early in a boot systemd is not on the bus yet: its name has
		// no owner and the daemon cannot activate it.
		var de dbus.Error
		if !errors.As(err, &de) || !strings.HasPrefix(de.Name, "org.freedesktop.DBus.Error.") || ctx.Err() != nil {
			break
		}
		if de.Name != "org.freedesktop.DBus.Error.ServiceUnknown" && de.Name != "org.freedesktop.DBus.Error.NameHasNoOwner" {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err != nil {
		for _, f := range p.pipes {
			f.Close()
		}
		if p.tty != nil {
			p.tty.Close()
			p.slave.Close()
		}
		return nil, err
	}
	go p.wait()
	go func() {
		select {
		case <-ctx.Done():
			p.kill()
		case <-p.done:
		}
	}()
	return p, nil
}

// doorCommand is the command line a request runs as, under env -i: none
// of the box manager's environment (its DefaultEnvironment) either.
func doorCommand(req sandbox.ExecRequest) []string {
	env := append([]string{}, baseEnv...)
	if req.User == "" {
		env = append(env, "HOME=/root")
	}
	term := "TERM=dumb"
	if req.TTY != nil {
		term = "TERM=xterm-256color"
	}
	env = append(env, term)
	env = append(env, req.Env...)
	args := []string{"env", "-i"}
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

// openPTY opens a terminal in the box's own devpts (the command's
// systemd opens its side by path, TTYPath, and makes it the controlling
// terminal), as the box's root, sized; it answers the master side, a
// slave side of the supervisor's own and the terminal's number.
//
// The supervisor holds that slave until the unit has ended: a read of
// the master ends (EIO) only once no slave is open, and one was never
// opened when the unit is killed before its command opened TTYPath, so
// the read, and the exec with it, waited for ever (a TTY exec cancelled
// at its start, seen under load as a hung api/session test).
func (d *unitDoor) openPTY(size sandbox.WindowSize) (master, slave *os.File, n int, err error) {
	err = asRangeRoot(d.base, func() error {
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/root/dev/pts/ptmx", d.leader), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open the box's ptmx: %w", err)
		}
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			unix.Close(fd)
			return fmt.Errorf("unlock the box's pty: %w", err)
		}
		if n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN); err != nil {
			unix.Close(fd)
			return fmt.Errorf("the box's pty number: %w", err)
		}
		if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
			unix.Close(fd)
			return err
		}
		peer, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if errno != 0 {
			unix.Close(fd)
			return fmt.Errorf("open the box's pty's slave side: %w", errno)
		}
		master = os.NewFile(uintptr(fd), "ptmx")
		slave = os.NewFile(peer, "pts")
		return nil
	})
	return master, slave, n, err
}

// unitProcess is a command running as a transient unit of the box.
type unitProcess struct {
	bus            *boxBus
	name           string
	path           dbus.ObjectPath
	watch          *unitWatch // what the unit's signals said
	stdin          io.WriteCloser
	stdout, stderr io.Reader
	pipes          []*os.File
	tty            *os.File
	slave          *os.File        // with tty: the supervisor's own slave side, closed once the unit ended
	startJob       dbus.ObjectPath // StartTransientUnit's job
	killed         atomic.Bool     // kill was called
	done           chan struct{}
	closeOnce      sync.Once
	status         sandbox.ExitStatus
	err            error
}

func (p *unitProcess) unwatch() {
	p.bus.mu.Lock()
	delete(p.bus.waiters, p.path)
	p.bus.mu.Unlock()
}

// wait waits for the unit's end and reads its main process's status,
// from what the unit's signals carried (a property they did not carry is
// asked for). Ended: exited (RemainAfterExit) or failed, with no job
// left; right after StartTransientUnit the unit is inactive with its
// start job queued, not yet begun. Once that start job is over, inactive
// with no job is an end too (the start cancelled by a kill before the
// unit began, or the unit stopped), read afresh from the unit: systemd
// sends JobRemoved before the unit's own change, so what the signals
// said of the state may still be the start's.
func (p *unitProcess) wait() {
	defer close(p.done)
	defer p.unwatch()
	if p.slave != nil {
		defer p.slave.Close()
	}
	unit := p.bus.conn.Object(systemdName, p.path)
	get := func(iface, name string) (dbus.Variant, error) {
		if v, ok := p.watch.prop(name); ok {
			return v, nil
		}
		return unit.GetProperty(iface + "." + name)
	}
	ask := func(iface, name string) (dbus.Variant, error) { return unit.GetProperty(iface + "." + name) }
	const unitIf, serviceIf = "org.freedesktop.systemd1.Unit", "org.freedesktop.systemd1.Service"
	ended := func(get func(iface, name string) (dbus.Variant, error), inactiveToo bool) (bool, error) {
		state, err1 := get(unitIf, "ActiveState")
		sub, err2 := get(unitIf, "SubState")
		job, err3 := get(unitIf, "Job")
		if err := errors.Join(err1, err2, err3); err != nil {
			return false, fmt.Errorf("the command's unit: %w", err)
		}
		s, _ := state.Value().(string)
		return (s == "failed" || s == "active" && sub.Value() == "exited" || inactiveToo && s == "inactive") && noJob(job), nil
	}
	for {
		end, err := ended(get, false)
		if err == nil && !end {
			if _, over := p.watch.jobResult(p.startJob); over {
				end, err = ended(ask, true)
			}
		}
		if err != nil {
			p.err = err
			return
		}
		if end {
			break
		}
		<-p.watch.changed
		if !p.bus.conn.Connected() {
			p.err = errors.New("the command's unit: the box's bus connection ended")
			return
		}
	}
	// Asked, never taken from the signals: the service's own change
	// signal may come after the unit's, so what was heard of these can
	// be the start's.
	var svc map[string]dbus.Variant
	err := unit.Call("org.freedesktop.DBus.Properties.GetAll", 0, serviceIf).Store(&svc)
	// Let it go, without waiting for the answers: a failed unit is
	// collected once reset, an exited one once stopped (which,
	// KillMode=process, ends nothing it left).
	manager := p.bus.conn.Object(systemdName, systemdPath)
	manager.Go(managerIf+".ResetFailedUnit", dbus.FlagNoReplyExpected, nil, p.name)
	manager.Go(managerIf+".StopUnit", dbus.FlagNoReplyExpected, nil, p.name, "replace")
	if err != nil {
		p.err = fmt.Errorf("the command's unit: %w", err)
		return
	}
	c, _ := svc["ExecMainCode"].Value().(int32)
	st, _ := svc["ExecMainStatus"].Value().(int32)
	switch c {
	case 0: // no main process ever ran
		if p.killed.Load() {
			p.status = sandbox.ExitStatus{Code: 128 + int(syscall.SIGKILL), Signal: unix.SignalName(syscall.SIGKILL)}
			return
		}
		result, _ := svc["Result"].Value().(string)
		start, _ := p.watch.jobResult(p.startJob)
		p.err = fmt.Errorf("the command's unit ended before its command ran (start job %q, result %q)", start, result)
	case 2, 3: // CLD_KILLED, CLD_DUMPED
		sig := syscall.Signal(st)
		p.status = sandbox.ExitStatus{Code: 128 + int(st), Signal: unix.SignalName(sig)}
	default: // CLD_EXITED, or a start that failed (systemd's own status)
		p.status.Code = int(st)
	}
}

// noJob reports whether a unit's Job property, (id, path), names none.
func noJob(v dbus.Variant) bool {
	job, ok := v.Value().([]any)
	if !ok || len(job) != 2 {
		return false
	}
	id, _ := job[0].(uint32)
	return id == 0
}

// kill ends the command: SIGKILL to every process of its unit, then a
// stop, since a kill before systemd began the unit finds no process and
// its queued start would run the command afterwards, unattended; the
// stop replaces that start job (cancelled) or stops a unit that began
// meanwhile (KillMode=process: its main process).
func (p *unitProcess) kill() {
	p.killed.Store(true)
	manager := p.bus.conn.Object(systemdName, systemdPath)
	_ = manager.Call(managerIf+".KillUnit", 0, p.name, "all", int32(syscall.SIGKILL)).Err
	manager.Go(managerIf+".StopUnit", dbus.FlagNoReplyExpected, nil, p.name, "replace")
}

func (p *unitProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *unitProcess) Stdout() io.Reader     { return p.stdout }
func (p *unitProcess) Stderr() io.Reader     { return p.stderr }

func (p *unitProcess) Resize(_ context.Context, size sandbox.WindowSize) error {
	if p.tty == nil {
		return sandbox.Invalid("tty.size", "the command has no terminal to resize")
	}
	if err := size.Check(); err != nil {
		return err
	}
	return unix.IoctlSetWinsize(int(p.tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
}

// Wait implements sandbox.Process: it answers at the unit's end and then
// closes the supervisor's ends of the streams, as exec.Cmd's Wait does:
// read them to their end before.
func (p *unitProcess) Wait() (sandbox.ExitStatus, error) {
	<-p.done
	p.closeOnce.Do(func() {
		for _, f := range p.pipes {
			f.Close()
		}
		if p.tty != nil {
			p.tty.Close()
		}
	})
	return p.status, p.err
}
