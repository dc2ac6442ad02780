// Command probe tries one escape from a box, as whoever runs it, and
// prints one JSON line: {"case":..., "escaped":bool, "detail":...}.
// escaped is true only when the attempt reached what the box must not
// (a host canary opened by name, a host-wide file opened for writing, a
// process outside the box seen): the suite in api/sandbox/escape runs it
// in boxes and wants false, and runs it on the host as root (outside any
// box) and wants true, so a case that cannot see its own escape fails
// there.
//
// The probe never prints what it reads (a canary's content stays out of
// every output; it says how many bytes), never writes a host file (a write
// is tried by opening for writing, which is where proc, sysfs and the file
// systems check the right to write; the one write, to a cgroup v1
// release_agent, puts back the value it read, in a hierarchy the probe
// mounted itself), and does its mounts in a mount namespace of its own.
//
// Usage: probe [-config FILE] CASE; probe hold MARKER ABSTRACT (a process
// for another box to look for: it listens on the abstract unix socket and
// waits). CASE is one of the names cases lists, class/attempt.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

// nsEnv marks the probe's own re-execution in a new mount namespace.
const nsEnv = "COCOONBOX_PROBE_NS"

// cases are the attempts by name; ns marks those run in a mount
// namespace of the probe's own (made by a re-execution: a Go program
// cannot unshare its mount namespace once it runs threads).
var cases = map[string]struct {
	ns  bool
	run func(*escape.Config) (bool, string)
}{
	"open_by_handle_at/host-root": {false, handleRoot},
	"bind-mount/write":            {false, bindWrite},
	"bind-mount/read":             {false, bindRead},
	"mount/block-device":          {true, mountDisk},
	"mount/proc":                  {true, mountProc},
	"mount/sysfs":                 {true, mountSysfs},
	"umount/proc-overmounts":      {true, umountProc},
	"pivot_root/old-root":         {true, pivotRoot},
	"pivot_root/chroot-breakout":  {true, chrootBreakout},
	"kernel-module/init_module":   {false, initModule},
	"kernel-module/finit_module":  {false, finitModule},
	"proc-sys/write":              {false, procSysWrite},
	"sysrq-trigger/write":         {false, sysrqWrite},
	"sys/write":                   {false, sysWrite},
	"device/mknod-host-disk":      {true, mknodDisk},
	"device/mknod-host-loop":      {true, mknodLoop},
	"device/open-existing":        {false, openDevices},
	"cgroup-v1/release_agent":     {true, releaseAgent},
	"cgroup-v1/notify_on_release": {true, notifyOnRelease},
	"ptrace/outside-process":      {false, ptraceOutside},
	"other-box/disk":              {false, otherDisk},
	"other-box/processes":         {false, otherProcesses},
	"other-box/abstract-socket":   {false, otherSocket},
	"supervisor/environ":          {false, supervisorEnviron},
	"supervisor/memory":           {false, supervisorMemory},
	"supervisor/state-dir":        {false, supervisorState},
	"persist/outlive-delete":      {false, nil}, // persist, with its marker
	"persist/hold":                {false, nil}, // the persisting process itself
	"hold":                        {false, nil}, // the other box's listener
	"list":                        {false, nil},
}

func main() {
	configFile := flag.String("config", "/usr/local/share/cocoonbox-probe.json", "the test's Config (JSON)")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: probe [-config FILE] CASE | hold MARKER ABSTRACT | list")
		os.Exit(2)
	}
	name := flag.Arg(0)
	switch name {
	case "list":
		var names []string
		for n, c := range cases {
			if c.run != nil || n == "persist/outlive-delete" {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		fmt.Println(strings.Join(names, "\n"))
		return
	case "hold":
		hold(flag.Arg(1), flag.Arg(2))
		return
	case "persist/hold":
		persistHold(flag.Arg(1))
		return
	}
	c, ok := cases[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "probe: no case %q\n", name)
		os.Exit(2)
	}
	var cfg escape.Config
	data, err := os.ReadFile(*configFile)
	if err == nil {
		err = json.Unmarshal(data, &cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: the config: %v\n", err)
		os.Exit(2)
	}
	var escaped bool
	var detail string
	switch {
	case name == "persist/outlive-delete":
		escaped, detail = persist(flag.Arg(1))
	case c.ns && os.Getenv(nsEnv) == "":
		escaped, detail = inNamespace(*configFile, name)
	case c.ns:
		// In the probe's own mount namespace: nothing it mounts propagates
		// back to the box (or the host, in the control run).
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			escaped, detail = false, fmt.Sprintf("make the mounts private: %v", err)
		} else {
			escaped, detail = c.run(&cfg)
		}
	default:
		escaped, detail = c.run(&cfg)
	}
	out, _ := json.Marshal(escape.Result{Case: name, Escaped: escaped, Detail: detail})
	fmt.Println(string(out))
}

// inNamespace runs the case again in a new mount namespace: CLONE_NEWNS
// where the caller may (CAP_SYS_ADMIN), else with a user namespace that
// maps the caller to root, as an attacker without the capability would.
// It answers the child's line.
func inNamespace(configFile, name string) (bool, string) {
	run := func(attr *syscall.SysProcAttr) (bool, string, error) {
		cmd := exec.Command("/proc/self/exe", "-config", configFile, name)
		cmd.Env = append(os.Environ(), nsEnv+"=1")
		cmd.SysProcAttr = attr
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil && len(out) == 0 {
			return false, "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
		}
		var r escape.Result
		if err := json.Unmarshal(lastLine(out), &r); err != nil {
			return false, "", fmt.Errorf("the child's output %q: %v", out, err)
		}
		return r.Escaped, r.Detail, nil
	}
	escaped, detail, err := run(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS})
	if err == nil {
		return escaped, "own mount namespace: " + detail
	}
	first := err
	escaped, detail, err = run(&syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWNS | unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	})
	if err != nil {
		return false, fmt.Sprintf("no mount namespace of its own: %v; with a user namespace: %v", first, err)
	}
	return escaped, "own user and mount namespace: " + detail
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
