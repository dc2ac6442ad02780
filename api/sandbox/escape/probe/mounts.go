// The mount and umount classes: the host's disk, a new proc or sysfs
// mounted, /sys remounted read-write, what covers /proc unmounted.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

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
