package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

const (
	hostnamedName = "org.freedesktop.hostname1"
	hostnamedPath = "/org/freedesktop/hostname1"
	staticFile    = "/etc/hostname"
)

// hostnamer sets the hostnames through systemd-hostnamed, or directly
// when conn is nil.
type hostnamer struct {
	conn *dbus.Conn
	obj  dbus.BusObject
}

// newHostnamer connects to the system bus. On an error the returned
// hostnamer still works, directly.
func newHostnamer() (*hostnamer, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return &hostnamer{}, err
	}
	return &hostnamer{conn: conn, obj: conn.Object(hostnamedName, hostnamedPath)}, nil
}

func (h *hostnamer) Close() {
	if h.conn != nil {
		h.conn.Close()
	}
}

// Via says how the hostname was set, for the journal.
func (h *hostnamer) Via() string {
	if h.conn != nil {
		return "systemd-hostnamed"
	}
	return "direct"
}

// Current returns the kernel hostname (uname, our UTS namespace, which
// the unit does not separate from the box's) and the static one.
func (h *hostnamer) Current() (kernel, static string) {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Nodename[:])
	}
	if data, err := os.ReadFile(staticFile); err == nil {
		static = strings.TrimSpace(string(data))
	}
	return kernel, static
}

// Set sets the static hostname and the kernel hostname to name.
// hostnamed's SetStaticHostname writes /etc/hostname and, the static name
// taking precedence, sets the kernel hostname too; SetHostname follows
// only if the kernel name did not change. When hostnamed is not on the
// bus, the names are set directly.
func (h *hostnamer) Set(name string) error {
	if h.conn != nil {
		err := h.obj.Call(hostnamedName+".SetStaticHostname", 0, name, false).Err
		var derr dbus.Error
		if errors.As(err, &derr) && derr.Name == "org.freedesktop.DBus.Error.ServiceUnknown" {
			h.conn.Close()
			h.conn = nil
			return h.Set(name)
		}
		if err != nil {
			return fmt.Errorf("hostnamed SetStaticHostname: %w", err)
		}
		if kernel, _ := h.Current(); kernel != name {
			if err := h.obj.Call(hostnamedName+".SetHostname", 0, name, false).Err; err != nil {
				return fmt.Errorf("hostnamed SetHostname: %w", err)
			}
		}
		if kernel, static := h.Current(); kernel != name || static != name {
			return fmt.Errorf("hostnamed left the kernel hostname %q and the static one %q", kernel, static)
		}
		return nil
	}
	if err := durable.WriteFile(staticFile, []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	return nil
}
