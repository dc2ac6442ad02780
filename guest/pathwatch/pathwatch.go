// Package pathwatch runs a helper's work at start and again after every
// change of the few paths it reads, without ever missing one.
//
// Why not a systemd path unit alone: a path unit does not watch while the
// service it started runs, and does not look at PathChanged= again when
// the run ends, so a change landing at the very end of a run is never
// acted on (the vault's churn test saw the last of 100 changes stay
// unrendered). A resident helper whose watches are in place before each
// read cannot miss one: an event that comes during a run is read after it
// and brings one more run. It also pays its sandbox's set-up once, not at
// every change. The path units stay as the contracts' triggers: they start
// the service again should it not be running.
//
// Serves Contract: Box identity (the hostname follows every identity
// write) and Box API keys ("on every change of /run/silkd.env").
package pathwatch

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirMask is what a change looks like in a watched directory: a write
// closed, a rename in or out, a creation, a deletion, new attributes (of an
// entry, or of the directory itself), and the directory going away. Not
// IN_MODIFY: a writer that writes in place in several writes would be read
// half-written.
const dirMask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_CREATE |
	unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// Run watches paths (absolute, clean; files or directories) and calls fn:
// once when the watches are set, then ready (sd_notify READY=1 for a
// Type=notify service), then again after every batch of events that
// concern one of paths: its creation, a rename into or out of its place, a
// write closed, its deletion, new owner or mode (of a file, or of a
// directory in paths itself). Each path is watched through its parent
// directory (which must exist, unless it is itself one of paths), and a
// path that is a directory also directly; a directory in paths that is
// missing or replaced is watched again as soon as its parent sees it back.
//
// Run returns nil once stop (a file descriptor; -1 for none) becomes
// readable, and an error when a parent directory that is not itself in
// paths cannot be watched or goes away, or inotify fails; a service then
// exits non-zero and systemd starts it again.
func Run(paths []string, fn, ready func(), stop int) error {
	w, err := newWatcher(paths)
	if err != nil {
		return err
	}
	defer unix.Close(w.fd)
	fn()
	ready()
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	if stop >= 0 {
		fds = append(fds, unix.PollFd{Fd: int32(stop), Events: unix.POLLIN})
	}
	buf := make([]byte, 64*1024)
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("poll: %w", err)
		}
		if len(fds) > 1 && fds[1].Revents != 0 {
			return nil
		}
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil || n <= 0 {
			return fmt.Errorf("read inotify events: %v", err)
		}
		changed, err := w.handle(buf[:n])
		if err != nil {
			return err
		}
		if changed {
			fn()
		}
	}
}

type watcher struct {
	fd    int
	paths map[string]bool  // what fn reads
	byWD  map[int32]string // watch descriptor → directory
	wdOf  map[string]int32 // directory → watch descriptor
}

func newWatcher(paths []string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &watcher{fd: fd, paths: map[string]bool{}, byWD: map[int32]string{}, wdOf: map[string]int32{}}
	// The directories to watch: each path's parent and the path itself
	// (a file fails with ENOTDIR and is skipped), shallowest first.
	var dirs []string
	seen := map[string]bool{}
	for _, p := range paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			unix.Close(fd)
			return nil, fmt.Errorf("watch %q: the path must be absolute and clean", p)
		}
		w.paths[p] = true
		for _, d := range []string{filepath.Dir(p), p} {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) < len(dirs[j]) })
	for _, d := range dirs {
		if err := w.add(d); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return w, nil
}

// add watches directory d. Only a directory that is itself one of paths
// may be missing (or a file, for a path that is a file): its parent's
// watch sees it come. A parent that is only a parent must be there.
func (w *watcher) add(d string) error {
	wd, err := unix.InotifyAddWatch(w.fd, d, dirMask)
	if err != nil {
		if (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)) && w.paths[d] {
			return nil
		}
		return fmt.Errorf("watch %s: %w", d, err)
	}
	w.byWD[int32(wd)] = d
	w.wdOf[d] = int32(wd)
	return nil
}

// handle reads a buffer of events; changed when one concerns a path or the
// queue overflowed (anything may have changed).
func (w *watcher) handle(buf []byte) (changed bool, err error) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			changed = true
			continue
		}
		dir, ok := w.byWD[ev.Wd]
		if !ok {
			continue
		}
		p := dir
		if name := unix.ByteSliceToString(raw); name != "" {
			p = filepath.Join(dir, name)
		}
		switch {
		case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 && p == dir:
			// The directory went away (or moved: its watch follows the
			// inode, not the path). A directory in paths comes back
			// through its parent's watch; any other is needed.
			if _, still := w.wdOf[dir]; still {
				_, _ = unix.InotifyRmWatch(w.fd, uint32(ev.Wd))
				delete(w.wdOf, dir)
			}
			delete(w.byWD, ev.Wd)
			if !w.paths[dir] {
				return changed, fmt.Errorf("the watched directory %s went away", dir)
			}
			changed = true
		case w.paths[p]:
			changed = true
			// A directory of paths made or renamed into place: watch it.
			if ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && p != dir {
				if err := w.add(p); err != nil {
					return changed, err
				}
			}
		}
	}
	return changed, nil
}
