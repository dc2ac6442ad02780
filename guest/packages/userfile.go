package packages

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// The list's place under the user's home: ~/.config/cocoonbox/packages.
const (
	ListDir  = ".config/cocoonbox"
	ListName = "packages"
)

// Home is the user whose list it is: the home directory (absolute) and the
// ids the list and its directories belong to.
type Home struct {
	Dir      string
	UID, GID int
}

// Path is the list's path, for messages.
func (h Home) Path() string { return filepath.Join(h.Dir, ListDir, ListName) }

// ErrUnsafePath reports a directory of the list's path that is a symlink,
// not a directory, or not the user's: the list is then neither read nor
// written.
var ErrUnsafePath = errors.New("unsafe path")

// openDir opens the list's directory without following a symlink anywhere
// on the way (each component with O_NOFOLLOW from "/"), and checks on each
// opened descriptor from the home directory down that it is the user's.
// With create, missing directories under the home are made (0700). The
// home directory and those below it are the user's, so a symlink or odd
// file placed there must never lead a root caller elsewhere.
func (h Home) openDir(create bool) (int, error) {
	if !filepath.IsAbs(h.Dir) || filepath.Clean(h.Dir) != h.Dir {
		return -1, fmt.Errorf("home directory %q is not a clean absolute path", h.Dir)
	}
	fd, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /: %w", err)
	}
	parts := strings.Split(strings.TrimPrefix(h.Dir, "/"), "/")
	homeDepth := len(parts)
	parts = append(parts, strings.Split(ListDir, "/")...)
	path := ""
	for i, p := range parts {
		if p == "" {
			continue
		}
		path += "/" + p
		next, err := unix.Openat(fd, p, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create && i >= homeDepth {
			if err = unix.Mkdirat(fd, p, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, p, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				// Made by root: give it to the user, on the descriptor.
				if err == nil && os.Geteuid() == 0 {
					err = unix.Fchown(next, h.UID, h.GID)
				}
			}
		}
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			return -1, fmt.Errorf("%s: %w: a symlink or not a directory (it must be a directory of uid %d)", path, ErrUnsafePath, h.UID)
		case errors.Is(err, unix.ENOENT):
			return -1, fmt.Errorf("%s: %w", path, os.ErrNotExist)
		case err != nil:
			return -1, fmt.Errorf("open %s: %w", path, err)
		}
		fd = next
		if i >= homeDepth-1 {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("fstat %s: %w", path, err)
			}
			if int(st.Uid) != h.UID {
				unix.Close(fd)
				return -1, fmt.Errorf("%s: %w: owned by uid %d, not the user's uid %d", path, ErrUnsafePath, st.Uid, h.UID)
			}
		}
	}
	return fd, nil
}

// OpenList opens the user's list for reading without following a symlink
// on the way or at the end, and checks on the descriptor that it is a
// regular file of the user's. A list that does not exist is an error
// matching os.ErrNotExist; an unsafe one matches ErrUnsafePath.
func (h Home) OpenList() (*os.File, error) {
	dir, err := h.openDir(false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	// O_NONBLOCK: a FIFO placed there must not hang the reader.
	fd, err := unix.Openat(dir, ListName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("%s: %w", h.Path(), os.ErrNotExist)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s: %w: a symlink (the list must be a regular file of uid %d)", h.Path(), ErrUnsafePath, h.UID)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", h.Path(), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fstat %s: %w", h.Path(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != h.UID {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w: not a regular file of uid %d (mode %o, uid %d)", h.Path(), ErrUnsafePath, h.UID, st.Mode, st.Uid)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), h.Path()), nil
}

// WriteList writes names, one a line, as the user's list, the safe way:
// a new file beside it (O_EXCL, O_NOFOLLOW), fsync, renamed over the old
// name, the directory fsynced, all relative to the directory descriptor
// openDir checked (internal/durable.WriteAt; renameio works on path names,
// which would be resolved again). A symlink or other non-directory
// entry at the list's name is replaced, never followed: replaced says what
// was there ("" for nothing or a regular file). A list that already holds
// exactly these lines is left untouched (changed false).
//
// The caller should run as the user (uid Home.UID): then the kernel, too,
// refuses any write the user could not make. Run as root, the new file is
// given to the user with fchown on its descriptor.
func (h Home) WriteList(names []string) (changed bool, replaced string, err error) {
	var buf bytes.Buffer
	for _, n := range names {
		buf.WriteString(n)
		buf.WriteByte('\n')
	}
	dir, err := h.openDir(true)
	if err != nil {
		return false, "", err
	}
	defer unix.Close(dir)

	var st unix.Stat_t
	switch err := unix.Fstatat(dir, ListName, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return false, "", fmt.Errorf("stat %s: %w", h.Path(), err)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return false, "", fmt.Errorf("%s: %w: a directory, not the list", h.Path(), ErrUnsafePath)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		replaced = fileType(st.Mode)
	default:
		if old, err := readAt(dir, ListName); err == nil && bytes.Equal(old, buf.Bytes()) && int(st.Uid) == h.UID {
			return false, "", nil
		}
	}

	err = durable.WriteAt(dir, ListName, durable.File{Data: buf.Bytes(), Mode: 0o644,
		Chown: os.Geteuid() == 0, UID: h.UID, GID: h.GID})
	switch {
	case errors.Is(err, durable.ErrNotSynced):
		return true, replaced, fmt.Errorf("write %s: %w", h.Path(), err)
	case err != nil:
		return false, "", fmt.Errorf("write %s: %w", h.Path(), err)
	}
	return true, replaced, nil
}

// readAt reads a regular file in dir without following a symlink, bounded
// by MaxListSize.
func readAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxListSize+1))
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device node"
	}
	return "an odd file"
}
