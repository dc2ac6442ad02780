package rundir

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// noFollow is how every path is resolved: no symlink and no magic link
// anywhere, so what is checked on the descriptor is what the name meant.
const noFollow = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// OpenPath opens an absolute path with openat2 and no symlink anywhere in
// it. flags are open(2) flags; O_CLOEXEC and O_NOFOLLOW are added.
func OpenPath(path string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: noFollow}
	return unix.Openat2(unix.AT_FDCWD, path, &how)
}

// OpenBeneath opens name (relative, one or more components) below the
// directory dfd, never following a symlink and never leaving dfd.
func OpenBeneath(dfd int, name string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: noFollow | unix.RESOLVE_BENEATH}
	return unix.Openat2(dfd, name, &how)
}

// placeError turns an open's errno into a refusal under rule, naming path.
func placeError(rule branchbox.Rule, path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return branchbox.Refuse(rule, path, "is or passes through a symlink; symlinks are refused")
	case errors.Is(err, unix.ENOTDIR):
		return branchbox.Refuse(rule, path, "is not a directory")
	case errors.Is(err, unix.ENOENT):
		return branchbox.Refuse(rule, path, "does not exist")
	case errors.Is(err, unix.EACCES):
		return branchbox.Refuse(rule, path, "permission denied: run branchbox as root or as the run's owner")
	case errors.Is(err, unix.ENXIO):
		return branchbox.Refuse(rule, path, "is not a regular file")
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// CheckAncestors refuses a path any directory of which, from / down to
// path itself, another UID could replace or rename entries in (Contract:
// Managed runtime manifest v2, "an ancestor that another UID could
// replace, apart from sticky directories such as /tmp"): each must be
// owned by root or owner, and group- or world-writable only when sticky.
// Symlinks are refused on the way.
func CheckAncestors(rule branchbox.Rule, path string, owner uint32) error {
	dir := "/"
	for _, c := range append([]string{""}, strings.Split(strings.TrimPrefix(path, "/"), "/")...) {
		if c != "" {
			dir = strings.TrimSuffix(dir, "/") + "/" + c
		}
		fd, err := OpenPath(dir, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return placeError(rule, dir, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("fstat %s: %w", dir, err)
		}
		if st.Uid != 0 && st.Uid != owner {
			return branchbox.Refuse(rule, dir, "belongs to uid %d, who could replace what is below it (allowed: root, uid %d)", st.Uid, owner)
		}
		if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return branchbox.Refuse(rule, dir, "is group- or world-writable (mode %04o) and not sticky, so another UID could replace what is below it", st.Mode&0o7777)
		}
	}
	return nil
}

func fstat(fd int, path string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	return &st, nil
}
