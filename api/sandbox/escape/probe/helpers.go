// The helpers the cases share: the mount table, the canaries looked up by
// name under a directory, a scratch tmpfs, a device number, host-wide
// files opened for writing.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

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

func under(dir string, rel []string) []string {
	var out []string
	for _, r := range rel {
		out = append(out, filepath.Join(dir, r))
	}
	return out
}
