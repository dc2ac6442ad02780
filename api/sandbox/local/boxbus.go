package local

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// boxBus is one connection to a box's system bus and the dispatch of the
// units' property changes to the commands that wait on them.
type boxBus struct {
	conn    *dbus.Conn
	mu      sync.Mutex
	waiters map[dbus.ObjectPath]*unitWatch
	// subscribed: Manager.Subscribe answered on this connection (a second
	// call is an error).
	subscribed bool
}

const (
	systemdName = "org.freedesktop.systemd1"
	systemdPath = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIf   = "org.freedesktop.systemd1.Manager"
)

// dialBus connects to the box's system bus as the box's root, Hello'd,
// subscribed to the units' changes.
func (d *unitDoor) dialBus() (*boxBus, error) {
	type result struct {
		c   *dbus.Conn
		err error
	}
	ch := make(chan result, 1)
	path := fmt.Sprintf("/proc/%d/root/run/dbus/system_bus_socket", d.leader)
	go func() {
		// This thread's ids become the box root's and are never given
		// back: it ends with this goroutine (LockOSThread without an
		// unlock). Its capabilities are raised again from the permitted
		// set, which the change of effective uid kept, to pass the
		// leader's root as the supervisor would.
		runtime.LockOSThread()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(d.base), ^uintptr(0)); e != 0 {
			ch <- result{nil, fmt.Errorf("setresgid: %w", e)}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(d.base), ^uintptr(0)); e != 0 {
			ch <- result{nil, fmt.Errorf("setresuid: %w", e)}
			return
		}
		if err := raiseEffective(); err != nil {
			ch <- result{nil, err}
			return
		}
		c, err := dbus.Dial("unix:path=" + path)
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("the box's system bus: %w", r.err)
	}
	c := r.c
	// uid 0, as the box sees the connection's credentials.
	if err := c.Auth([]dbus.Auth{dbus.AuthExternal("0")}); err != nil {
		c.Close()
		return nil, fmt.Errorf("the box's system bus: %w", err)
	}
	if err := c.Hello(); err != nil {
		c.Close()
		return nil, fmt.Errorf("the box's system bus: %w", err)
	}
	b := &boxBus{conn: c, waiters: map[dbus.ObjectPath]*unitWatch{}}
	err := c.AddMatchSignal(dbus.WithMatchSender(systemdName), dbus.WithMatchInterface("org.freedesktop.DBus.Properties"),
		dbus.WithMatchMember("PropertiesChanged"), dbus.WithMatchPathNamespace("/org/freedesktop/systemd1/unit"))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the box's system bus: %w", err)
	}
	// JobRemoved tells a command whose start job was cancelled (a kill
	// before the unit began) that the unit will never run, which no
	// property change of the unit says.
	err = c.AddMatchSignal(dbus.WithMatchSender(systemdName), dbus.WithMatchInterface(managerIf),
		dbus.WithMatchMember("JobRemoved"), dbus.WithMatchObjectPath(systemdPath))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("the box's system bus: %w", err)
	}
	signals := make(chan *dbus.Signal, 256)
	c.Signal(signals)
	go b.dispatch(signals)
	return b, nil
}

// raiseEffective makes the calling thread's permitted capabilities
// effective.
func raiseEffective() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// subscribe asks the box's systemd for the units' changes, once.
func (b *boxBus) subscribe(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subscribed {
		return nil
	}
	err := b.conn.Object(systemdName, systemdPath).CallWithContext(ctx, managerIf+".Subscribe", 0).Err
	b.subscribed = err == nil
	return err
}

// unitWatch is what a command waiting on its unit has heard of it: the
// properties its PropertiesChanged signals carried (systemd sends the
// values of ActiveState, SubState, Job, ExecMainCode and ExecMainStatus
// with each change), the results of its jobs' JobRemoved signals by job
// path, and a wake-up for each signal.
type unitWatch struct {
	mu      sync.Mutex
	props   map[string]dbus.Variant
	jobs    map[dbus.ObjectPath]string
	changed chan struct{}
}

func newUnitWatch() *unitWatch {
	return &unitWatch{props: map[string]dbus.Variant{}, jobs: map[dbus.ObjectPath]string{}, changed: make(chan struct{}, 1)}
}

// jobResult answers the result JobRemoved gave for job ("done",
// "canceled", "failed", …), and false while none was heard.
func (w *unitWatch) jobResult(job dbus.ObjectPath) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.jobs[job]
	return r, ok
}

// prop answers the last value heard of property name.
func (w *unitWatch) prop(name string) (dbus.Variant, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.props[name]
	return v, ok
}

func (w *unitWatch) wake() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// dispatch hands each unit's property changes to the command waiting on
// it; when the connection ends it wakes them all.
func (b *boxBus) dispatch(signals chan *dbus.Signal) {
	for s := range signals {
		if s.Name == managerIf+".JobRemoved" {
			b.jobRemoved(s)
			continue
		}
		b.mu.Lock()
		w := b.waiters[s.Path]
		b.mu.Unlock()
		if w == nil {
			continue
		}
		if len(s.Body) >= 3 {
			changed, _ := s.Body[1].(map[string]dbus.Variant)
			gone, _ := s.Body[2].([]string)
			w.mu.Lock()
			for k, v := range changed {
				w.props[k] = v
			}
			for _, k := range gone {
				delete(w.props, k)
			}
			w.mu.Unlock()
		}
		w.wake()
	}
	b.mu.Lock()
	for _, w := range b.waiters {
		w.wake()
	}
	b.mu.Unlock()
}

// jobRemoved hands a JobRemoved signal (id, job, unit, result) to the
// command waiting on its unit.
func (b *boxBus) jobRemoved(s *dbus.Signal) {
	if len(s.Body) < 4 {
		return
	}
	job, _ := s.Body[1].(dbus.ObjectPath)
	unit, _ := s.Body[2].(string)
	result, _ := s.Body[3].(string)
	b.mu.Lock()
	w := b.waiters[unitPath(unit)]
	b.mu.Unlock()
	if w == nil {
		return
	}
	w.mu.Lock()
	w.jobs[job] = result
	w.mu.Unlock()
	w.wake()
}

// busFor answers the box's bus, connecting at the first call and again
// after a connection ended. Early in a boot the bus is not there yet: it
// is tried again every 10 ms until ctx ends.
func (d *unitDoor) busFor(ctx context.Context) (*boxBus, error) {
	for {
		d.mu.Lock()
		if d.bus != nil && !d.bus.conn.Connected() {
			d.bus = nil
		}
		b := d.bus
		var err error
		if b == nil {
			if b, err = d.dialBus(); err == nil {
				d.bus = b
			}
		}
		d.mu.Unlock()
		if err == nil {
			return b, nil
		}
		if _, serr := os.Stat(fmt.Sprintf("/proc/%d", d.leader)); serr != nil {
			return nil, fmt.Errorf("the box's PID 1 is gone: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// close ends the door's bus connection (the box is going).
func (d *unitDoor) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bus != nil {
		d.bus.conn.Close()
		d.bus = nil
	}
}

// unitPath is the object path of unit name, escaped as systemd escapes a
// bus label: every byte but [A-Za-z0-9] as _ and two hex digits.
func unitPath(name string) dbus.ObjectPath {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return dbus.ObjectPath("/org/freedesktop/systemd1/unit/" + b.String())
}
