package toolrequest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// readStaged returns the bytes of .processing/<id>.json when a dispatcher
// that died moved it there and never recorded its claim (Contract: "It
// retains the exact staged file until the replay claim is durable"),
// re-checked as claimRequest checks it; none is nil, nil.
func readStaged(dir, id string, consumerUID uint32) ([]byte, error) {
	pfd, err := openSub(dir, ProcessingDir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	name := id + ".json"
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	return readClaimed(pfd, name, dir+"/"+ProcessingDir+"/"+name, consumerUID)
}

// unstage removes .processing/<id>.json exactly, once the claim is durable.
func unstage(dir, id string) error {
	pfd, err := openSub(dir, ProcessingDir)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Unlinkat(pfd, id+".json", 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("spool %s: unstaging %s: %w", dir, id, err)
	}
	return unix.Fsync(pfd)
}

// isPending reports whether requests/<id>.json exists (not followed).
func isPending(dir, id string) (bool, error) {
	rfd, err := openSub(dir, RequestsDir)
	if err != nil {
		return false, err
	}
	defer unix.Close(rfd)
	return exists(rfd, id+".json")
}

// waitFinalized returns once requests/<id>.json exists, or ErrNotPending when ctx
// ends first. It waits on inotify (a watch on the opened requests/, set
// before the first look, so a rename in between is not missed), never by
// polling the name on a timer.
func waitFinalized(ctx context.Context, dir, id string) error {
	rfd, err := openSub(dir, RequestsDir)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("spool %s: inotify: %w", dir, err)
	}
	defer unix.Close(ifd)
	// The watch is on the descriptor's directory, not on a name a
	// consumer could swap.
	if _, err := unix.InotifyAddWatch(ifd, fmt.Sprintf("/proc/self/fd/%d", rfd), unix.IN_MOVED_TO|unix.IN_CREATE|unix.IN_CLOSE_WRITE); err != nil {
		return fmt.Errorf("spool %s: inotify watch: %w", dir, err)
	}
	buf := make([]byte, 64<<10)
	for {
		if ok, err := exists(rfd, id+".json"); ok || err != nil {
			return err
		}
		ms := -1
		if deadline, ok := ctx.Deadline(); ok {
			ms = int(time.Until(deadline).Milliseconds())
			if ms <= 0 {
				return ErrNotPending
			}
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}}, ms); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("spool %s: poll: %w", dir, err)
		}
		if ctx.Err() != nil {
			return ErrNotPending
		}
		for {
			if _, err := unix.Read(ifd, buf); err != nil {
				break // drained (EAGAIN)
			}
		}
	}
}

func exists(dfd int, name string) (bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return true, nil
}

// openSub opens dir/name as a directory, no symlink followed anywhere.
func openSub(dir, name string) (int, error) {
	sfd, err := rundir.OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, fmt.Errorf("spool %s: %w", dir, err)
	}
	defer unix.Close(sfd)
	fd, err := rundir.OpenBeneath(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, fmt.Errorf("spool %s: %s: %w", dir, name, err)
	}
	return fd, nil
}
