package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Box root is not host root (docs/boxes.md, "The local supervisor": user namespaces): every box
// runs in a user namespace of its own, whose 65536 ids map to a range of
// host ids no other running box holds, so uid 0 in a box is an
// unprivileged host uid and no host capability is in its reach.
//
// The disk keeps the ids the box sees (0 for root, 1000 for user) and is
// shown to the box through idmapped mounts: the image and the machine's
// disk directory are each mounted idmapped to the box's range and are the
// overlay's layers. So nothing is chowned at a boot (nspawn's own
// --private-users-ownership=chown copied up all 881 MB of the image), a
// spare's range goes with its take, and saves, clones, restores and
// rebases move the disk as it is whatever range the next boot gets.

// A box's uid range: size ids from its base, which is uidRangeFirst plus a
// multiple of size. The ranges lie above the ones systemd-nspawn's own
// --private-users=pick takes (0x00080000 to 0x6FFF0000) and end below
// 2^31, which some tools read as negative.
const (
	uidRangeSize  = 0x10000
	uidRangeFirst = 0x70000000
	uidRanges     = 0x1000
)

// uidRange is one box's lease of a range, held by an exclusive lock on a
// file under /run named by its base: two supervisors on one host (the
// api's and a sandboxd's, or test packages) never hand one range out
// twice, and a crashed supervisor's leases end with its process.
type uidRange struct {
	Base uint32
	lock *os.File
}

// uidRangeDir holds the leases' lock files.
var uidRangeDir = "/run/cocoonbox/uid-ranges"

// leaseUIDRange takes the lowest range no one holds.
func leaseUIDRange() (*uidRange, error) {
	if err := os.MkdirAll(uidRangeDir, 0o700); err != nil {
		return nil, err
	}
	for i := 0; i < uidRanges; i++ {
		base := uint32(uidRangeFirst + i*uidRangeSize)
		f, err := os.OpenFile(filepath.Join(uidRangeDir, strconv.FormatUint(uint64(base), 10)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("lock uid range %d: %w", base, err)
		}
		return &uidRange{Base: base, lock: f}, nil
	}
	return nil, fmt.Errorf("all %d uid ranges of boxes are taken", uidRanges)
}

// release gives the range back; nil and a second call are no-ops.
func (u *uidRange) release() {
	if u != nil && u.lock != nil {
		u.lock.Close()
		u.lock = nil
	}
}

// nspawnArg is systemd-nspawn's flag for the range. Ownership is off: the
// idmapped layers already show the disk in the range.
func (u *uidRange) nspawnArgs() []string {
	return []string{fmt.Sprintf("--private-users=%d:%d", u.Base, uidRangeSize), "--private-users-ownership=off"}
}

// userNSFile opens a user namespace that maps 0..size-1 to the range, for
// mount_setattr's MOUNT_ATTR_IDMAP; the process that made it is gone when
// this returns, the open file keeps the namespace.
func (u *uidRange) userNSFile() (*os.File, error) {
	// A child in a new user namespace that waits on its stdin: Go writes
	// its uid_map and gid_map before it runs, so once it started its
	// namespace file is the mapping.
	cmd := exec.Command("/bin/cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(u.Base), Size: uidRangeSize}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(u.Base), Size: uidRangeSize}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("a user namespace for uid range %d: %w", u.Base, err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	in.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("a user namespace for uid range %d: %w", u.Base, err)
	}
	return f, nil
}

// bindIdmapped mounts src on dst (an existing directory) through the user
// namespace ns's mapping: a file src holds as uid k is dst's as the
// mapping's k.
func bindIdmapped(src, dst string, ns *os.File) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap %s (the kernel must allow idmapped mounts of its file system): %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount idmapped %s on %s: %w", src, dst, err)
	}
	return nil
}

// asRangeRoot runs f on a thread whose file system ids are the range's
// root, with every capability the supervisor has still effective (a
// change of fsuid from 0 drops the file capabilities from the effective
// set; they are raised again from the permitted one). overlayfs keeps its
// mounter's credentials for the work it does in the upper layer, and an
// idmapped upper layer can hold only files of ids in the range: mounted
// as host root, the overlay cannot make its work directory (EOVERFLOW)
// and falls back to read-only. The thread is never handed back to the
// runtime: it ends with f's goroutine.
func asRangeRoot(base uint32, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		unix.Setfsuid(int(base))
		unix.Setfsgid(int(base))
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			ch <- fmt.Errorf("capget: %w", err)
			return
		}
		data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			ch <- fmt.Errorf("capset: %w", err)
			return
		}
		ch <- f()
	}()
	return <-ch
}

// makeMountPoints makes, as the range's root, the files the box's binds
// are mounted on (each path absolute in the box, its parents made as
// directories): systemd-nspawn makes a missing one as host root, which
// an idmapped layer refuses (EOVERFLOW). Every path is resolved inside
// root (RESOLVE_IN_ROOT): a link the box planted in its disk cannot point
// the supervisor's thread, which keeps its capabilities, at a host file.
func makeMountPoints(root string, base uint32, paths []string) error {
	return asRangeRoot(base, func() error {
		dir, err := unix.Open(root, unix.O_DIRECTORY|unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		for _, p := range paths {
			rel := strings.TrimPrefix(filepath.Clean(p), "/")
			parent := "."
			for _, part := range strings.Split(filepath.Dir(rel), "/") {
				if part == "." {
					continue
				}
				parent = filepath.Join(parent, part)
				if err := mkdirIn(dir, parent); err != nil {
					return fmt.Errorf("mount point %s: %w", p, err)
				}
			}
			fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
				Mode: 0o644, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
			if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) {
				continue // not a file: nspawn's bind refuses it by itself
			}
			if err != nil {
				return fmt.Errorf("mount point %s: %w", p, err)
			}
			unix.Close(fd)
		}
		return nil
	})
}

// mkdirIn makes rel under dir (resolved in it) unless it is there.
func mkdirIn(dir int, rel string) error {
	parent, err := unix.Openat2(dir, filepath.Dir(rel), &unix.OpenHow{Flags: unix.O_DIRECTORY | unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if err := unix.Mkdirat(parent, filepath.Base(rel), 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}
