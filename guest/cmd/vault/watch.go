package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"unsafe"

	"github.com/cocoonbox/cocoonbox/guest/journal"
	"golang.org/x/sys/unix"
)

// watchMask is what a change of the claim env looks like in its directory:
// a write closed, a rename in or out, a creation, a deletion, new
// attributes. Not IN_MODIFY: a writer that writes in place in several
// writes would be rendered half-written.
const watchMask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_CREATE | unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// watch is `vault --watch`, what cocoonbox-vault.service runs (Contract:
// Box API keys, "on every change of /run/silkd.env"). It watches the
// claim env's directory, then renders, then calls ready (sd_notify READY=1:
// logins wait for the boot's render), and renders again after every event
// that names the file. The watch is in place before every read, so no
// change is lost: events that arrive during a render are read, together,
// after it, and cause one more render.
//
// Why a resident process rather than one run per change: a path unit does
// not watch while the service it started runs, and its PathChanged= is not
// looked at again when the run ends, so a change landing between a run's
// last look at the file and the end of the run was never rendered (the
// churn test caught it: the last of 100 changes stayed unrendered). It
// also pays the sandbox's set-up once instead of at every change.
//
// A bad claim env is logged and the last good render stays, as in a single
// run; watch returns only when the watch cannot go on (75, systemd
// restarts the service) or stop becomes readable (tests).
func watch(log *journal.Logger, envPath, dir string, ready func(), stop int) int {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		log.Send(journal.Err, msgInstallFailed, fmt.Sprintf("cannot watch %s: inotify: %v", envPath, err), "COCOONBOX_PATH", envPath)
		return exitTempFail
	}
	defer unix.Close(fd)
	parent, base := filepath.Dir(envPath), []byte(filepath.Base(envPath))
	if _, err := unix.InotifyAddWatch(fd, parent, watchMask); err != nil {
		log.Send(journal.Err, msgInstallFailed, fmt.Sprintf("cannot watch %s: %v", parent, err), "COCOONBOX_PATH", parent)
		return exitTempFail
	}
	run(log, envPath, dir)
	ready()
	buf := make([]byte, 64*1024)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if stop >= 0 {
		fds = append(fds, unix.PollFd{Fd: int32(stop), Events: unix.POLLIN})
	}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			log.Send(journal.Err, msgInstallFailed, fmt.Sprintf("cannot watch %s: poll: %v", envPath, err), "COCOONBOX_PATH", envPath)
			return exitTempFail
		}
		if len(fds) > 1 && fds[1].Revents != 0 {
			return exitOK
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil || n <= 0 {
			log.Send(journal.Err, msgInstallFailed, fmt.Sprintf("cannot watch %s: read: %v", envPath, err), "COCOONBOX_PATH", envPath)
			return exitTempFail
		}
		changed, gone := scanEvents(buf[:n], base)
		if gone {
			log.Send(journal.Err, msgInstallFailed, fmt.Sprintf("the watch on %s ended (the directory went away)", parent), "COCOONBOX_PATH", parent)
			return exitTempFail
		}
		if changed {
			run(log, envPath, dir)
		}
	}
}

// scanEvents reads a buffer of inotify events: changed when one names base
// or the queue overflowed (then anything may have changed), gone when the
// watch itself ended.
func scanEvents(buf, base []byte) (changed, gone bool) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			changed = true
		case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_UNMOUNT) != 0:
			gone = true
		case bytes.Equal(bytes.TrimRight(name, "\x00"), base):
			changed = true
		}
	}
	return changed, gone
}
