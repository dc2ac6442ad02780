package workspace

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// CopyTree copies the checked-out workspace src into dst (an existing empty
// directory: the workspace volume as the engine holds it), so the primary
// container gets the workspace without any bind (Security contract: no
// writable bind; docs/branchbox.md, "Managed launches (`feature launch`)",
// says why a copy). Directories, regular files and symlinks are copied with
// their permission bits (no setuid, setgid or sticky bit) and given uid:gid,
// the container's consumer; symlinks are recreated, never followed; other
// file types are skipped. The worktree's top-level .git file is left out: it
// names the guest's shared Git metadata, which stays outside. Every open is
// on a descriptor below the one before (openat2, no symlink), so a path
// swapped while it copies is never followed out of src. Run as root.
func CopyTree(src, dst string, uid, gid int) error {
	sfd, err := rundir.OpenPath(src, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer unix.Close(sfd)
	dfd, err := rundir.OpenPath(dst, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("copy into %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	c := &copier{uid: uid, gid: gid}
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := c.dir(sfd, dfd, src, true); err != nil {
		return err
	}
	return c.own(dfd, st.Mode, src)
}

type copier struct{ uid, gid int }

// dir copies the entries of sfd into dfd.
func (c *copier) dir(sfd, dfd int, path string, top bool) error {
	dup, err := unix.Dup(sfd)
	if err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	d := os.NewFile(uintptr(dup), path)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	for _, n := range names {
		if top && n == ".git" {
			continue
		}
		if err := c.entry(sfd, dfd, n, path+"/"+n); err != nil {
			return err
		}
	}
	return unix.Fsync(dfd)
}

func (c *copier) entry(sfd, dfd int, name, path string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return fmt.Errorf("copy %s: %w", path, err)
		}
		s, err := rundir.OpenBeneath(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("copy %s: %w", path, err)
		}
		defer unix.Close(s)
		d, err := rundir.OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("copy %s: %w", path, err)
		}
		defer unix.Close(d)
		if err := c.dir(s, d, path, false); err != nil {
			return err
		}
		return c.own(d, st.Mode, path)
	case unix.S_IFREG:
		return c.file(sfd, dfd, name, path, st.Mode)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(sfd, name, buf)
		if err == nil {
			err = unix.Symlinkat(string(buf[:n]), dfd, name)
		}
		if err == nil {
			err = unix.Fchownat(dfd, name, c.uid, c.gid, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", path, err)
		}
	}
	return nil
}

func (c *copier) file(sfd, dfd int, name, path string, mode uint32) error {
	in, err := rundir.OpenBeneath(sfd, name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	src := os.NewFile(uintptr(in), path)
	defer src.Close()
	out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	dst := os.NewFile(uintptr(out), path)
	_, err = io.Copy(dst, src)
	if err == nil {
		err = c.own(out, mode, path)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	return nil
}

// own gives fd the copier's owner and mode's permission bits.
func (c *copier) own(fd int, mode uint32, path string) error {
	if err := unix.Fchown(fd, c.uid, c.gid); err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	if err := unix.Fchmod(fd, mode&0o777); err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	return nil
}
