// The kernel classes: a module loaded, host-wide /proc/sys files,
// /proc/sysrq-trigger and /sys attributes opened for writing.

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

// procWrites are host-wide /proc files; opening one for writing is where
// proc checks the right to write it (sysctl_perm runs again at the write,
// with the same answer).
var procWrites = []string{"sys/kernel/core_pattern", "sys/kernel/panic", "sys/vm/swappiness", "sysrq-trigger"}

// sysWrites are host-wide sysfs attributes; kernfs checks the right to
// write at the open.
var sysWrites = []string{"kernel/uevent_helper", "kernel/mm/transparent_hugepage/enabled", "kernel/profiling", "kernel/rcu_expedited"}

// capModule says whether CAP_SYS_MODULE is in the effective set.
func capModule() bool {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n&(1<<unix.CAP_SYS_MODULE) != 0
		}
	}
	return false
}

// moduleVerdict reads a module load's errno: EPERM is the refusal (the
// capability check, modules_disabled or a seccomp filter); ENOSYS a
// kernel without modules, where no check ran; any other error came after
// the capability check, from the loader parsing the probe's garbage.
func moduleVerdict(call string, err error) (bool, string) {
	switch {
	case err == nil:
		return true, call + " loaded the probe's garbage as a module"
	case errors.Is(err, unix.EPERM):
		return false, fmt.Sprintf("%s: %v", call, err)
	case errors.Is(err, unix.ENOSYS):
		return false, fmt.Sprintf("%s: %v (a kernel without modules: nothing to load, CAP_SYS_MODULE effective: %v)", call, err, capModule())
	default:
		return true, fmt.Sprintf("%s passed the capability check and failed on the image: %v", call, err)
	}
}

func initModule(c *escape.Config) (bool, string) {
	return moduleVerdict("init_module", unix.InitModule([]byte("not a kernel module"), ""))
}

func finitModule(c *escape.Config) (bool, string) {
	f, err := os.CreateTemp("", "probe-module-")
	if err != nil {
		return false, err.Error()
	}
	defer os.Remove(f.Name())
	defer f.Close()
	f.WriteString("not a kernel module")
	return moduleVerdict("finit_module", unix.FinitModule(int(f.Fd()), "", 0))
}

func procSysWrite(c *escape.Config) (bool, string) {
	if p, errs := openWrite(under("/proc", procWrites[:3])); p != "" {
		return true, p + " opened for writing"
	} else {
		return false, strings.Join(errs, "; ")
	}
}

// sysrqWrite opens /proc/sysrq-trigger for writing, and never writes.
func sysrqWrite(c *escape.Config) (bool, string) {
	if p, errs := openWrite([]string{"/proc/sysrq-trigger"}); p != "" {
		return true, p + " opened for writing"
	} else {
		return false, strings.Join(errs, "; ")
	}
}

func sysWrite(c *escape.Config) (bool, string) {
	if p, errs := openWrite(under("/sys", sysWrites)); p != "" {
		return true, p + " opened for writing"
	} else {
		return false, strings.Join(errs, "; ")
	}
}
