// The device class: a node of the host's disk or a loop device made and
// opened, the box's own block devices and /dev/mem opened.

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

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
