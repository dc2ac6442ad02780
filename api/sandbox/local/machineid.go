package local

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"golang.org/x/sys/unix"
)

// bootMachineID is the machine id the box's systemd takes at a boot of
// the root at root (Contract: Journal: the journal's directory and every
// entry's _MACHINE_ID), and whether the supervisor chose it, so that Boot
// can report it without asking the box. systemd-nspawn reads the root's
// /etc/machine-id first: one that holds an id (a box booted before, a
// restored save) is the id, and --uuid is ignored. One that is missing or
// empty (the image's, a clone's reset) takes the id nspawn hands the box's
// systemd as $container_uuid, which writes it there: the supervisor picks
// it (chosen) and passes it as --uuid. Anything else (a link, a file
// nspawn would refuse) is left to nspawn and answered "": the file is the
// box's own writing, opened beneath root without following a link.
func bootMachineID(root string) (id string, chosen bool, err error) {
	dir, err := unix.Open(root, unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, err
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, "etc/machine-id", &unix.OpenHow{
		Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
	switch {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return "", false, nil
	default:
		f := os.NewFile(uintptr(fd), "etc/machine-id")
		var buf [40]byte
		n, rerr := 0, io.ErrNoProgress
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			n, rerr = io.ReadFull(f, buf[:])
		}
		f.Close()
		if rerr == nil || !(errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF)) {
			return "", false, nil // not a regular file, longer than an id, or unreadable
		}
		if t := bytes.TrimSpace(buf[:n]); len(t) > 0 {
			if sandbox.MachineIDRule.Match(t) {
				return string(t), false, nil
			}
			return "", false, nil
		}
	}
	// A v4 UUID's bits, as systemd's own sd_id128_randomize sets them.
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:]), true, nil
}
