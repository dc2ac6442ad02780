// The persist class: a process that outlives its box, started by a double
// fork or as a unit, trying to leave the box's cgroup.

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// persist starts a process that outlives the probe (a double fork, its
// own session), which tries to leave the box's cgroup and stays; the
// probe waits for its report and answers whether it left.
func persist(marker string) (bool, string) {
	if marker == "" {
		return false, "no marker"
	}
	report := filepath.Join(os.TempDir(), "probe-persist-"+marker)
	os.Remove(report)
	// The middle process starts the holder in a session of its own and
	// exits at once: the holder's parent is then the box's init (or a
	// subreaper), as a daemon's is.
	cmd := exec.Command("/bin/sh", "-c", `setsid "$0" persist/hold "$1" </dev/null >/dev/null 2>&1 &`, "/proc/self/exe", marker)
	if exe, err := os.Executable(); err == nil {
		cmd.Args[3] = exe
	}
	if err := cmd.Run(); err != nil {
		return false, fmt.Sprintf("start the holder: %v", err)
	}
	// Root also starts one as a unit of the box's systemd, which outlives
	// a login session (logind's KillUserProcesses=yes ends the first with
	// the session that started it) and the unit the probe may run in.
	unit := ""
	if os.Geteuid() == 0 {
		exe, _ := os.Executable()
		out, err := exec.Command("systemd-run", "--no-block", "--collect", "--quiet", "--unit=probe-hold-"+marker, exe, "persist/hold", marker+".unit").CombinedOutput()
		unit = fmt.Sprintf("; a unit holder: %v %s", err, bytes.TrimSpace(out))
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(report); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			s := strings.TrimSpace(string(b))
			return strings.HasPrefix(s, "escaped"), s + unit
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false, "the holder wrote no report in 20 s"
}

// persistHold is the persisting process: it tries to move itself to a
// cgroup outside the box (the root of its cgroup namespace, the root of a
// new cgroup2 mount, the host's root cgroup by a made-up kernfs handle),
// writes what it got to the report and waits forever.
func persistHold(marker string) {
	var notes []string
	me := []byte(strconv.Itoa(os.Getpid()))
	// left says whether the holder is outside its cgroup namespace's
	// root: the kernel shows it a path that climbs out ("0::/..").
	left := func() bool {
		cg, _ := os.ReadFile("/proc/self/cgroup")
		return strings.Contains("\n"+string(cg), "\n0::/..")
	}
	try := func(what, procs string) {
		if left() {
			return // out already: a later try would move it back in
		}
		if err := os.WriteFile(procs, me, 0); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", what, err))
		} else {
			notes = append(notes, what+": moved")
		}
	}
	try("the cgroup namespace's root", "/sys/fs/cgroup/cgroup.procs")
	for _, m := range mounts() {
		if m.fstype != "cgroup2" {
			continue
		}
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, m.point, 0)
		if err != nil || h.Size() != 8 {
			notes = append(notes, fmt.Sprintf("name_to_handle_at %s: %v (%d bytes)", m.point, err, h.Size()))
			continue
		}
		mfd, err := unix.Open(m.point, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		// kernfs's handle is the node's 64-bit id; the root's is 1 (its
		// generation 1 above).
		for _, id := range []uint64{1, 1 | 1<<32} {
			b := make([]byte, 8)
			binary.LittleEndian.PutUint64(b, id)
			fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(h.Type(), b), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
			if err != nil {
				notes = append(notes, fmt.Sprintf("open the root cgroup by handle %#x beside %s: %v", id, m.point, err))
				continue
			}
			try("the root cgroup by handle", fmt.Sprintf("/proc/self/fd/%d/cgroup.procs", fd))
			unix.Close(fd)
		}
		unix.Close(mfd)
	}
	// A cgroup2 mount of its own (on this thread, in a mount namespace of
	// its own), whose root is the cgroup namespace's.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		notes = append(notes, fmt.Sprintf("unshare a mount namespace: %v", err))
	} else if dir, err := os.MkdirTemp("", "probe-cgroup2-"); err == nil {
		unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
		if err := unix.Mount("cgroup2", dir, "cgroup2", 0, ""); err != nil {
			notes = append(notes, fmt.Sprintf("mount cgroup2: %v", err))
		} else {
			try("the root of a new cgroup2 mount", filepath.Join(dir, "cgroup.procs"))
		}
	}
	cg, _ := os.ReadFile("/proc/self/cgroup")
	verdict := "stayed"
	if left() {
		verdict = "escaped"
	}
	report := filepath.Join(os.TempDir(), "probe-persist-"+marker)
	os.WriteFile(report, []byte(fmt.Sprintf("%s: pid %d in %s; %s\n", verdict, os.Getpid(), strings.TrimSpace(string(cg)), strings.Join(notes, "; "))), 0o644)
	for {
		time.Sleep(time.Hour)
	}
}
