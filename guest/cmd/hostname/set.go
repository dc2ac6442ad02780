package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

const staticFile = "/etc/hostname"

// current returns the kernel hostname (uname, our UTS namespace, which
// the unit does not separate from the box's) and the static one.
func current() (kernel, static string) {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Nodename[:])
	}
	if data, err := os.ReadFile(staticFile); err == nil {
		static = strings.TrimSpace(string(data))
	}
	return kernel, static
}

// set writes the static hostname (/etc/hostname, atomically) and sets the
// kernel hostname to name itself, with the one capability systemd-hostnamed
// would use (CAP_SYS_ADMIN, sethostname(2)), rather than asking hostnamed
// over D-Bus: at boot that call waited for dbus.service and hostnamed's
// activation, about 400 ms of every box's boot on the path to running
// (issue 24, Deliver 9). hostnamed, when asked later, reads both anew.
func set(name string) error {
	if err := durable.WriteFile(staticFile, []byte(name+"\n"), 0o644); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	return nil
}
