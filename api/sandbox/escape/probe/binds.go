// The bind-mount class: the files and directories bound into the box,
// written to, and climbed out of to a canary.

package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

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
