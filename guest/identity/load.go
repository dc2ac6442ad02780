package identity

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is wrapped by every refusal of Load (and Write) that is about
// where the record lives rather than what it says: a symlink, a file or
// directory not owned by root or group- or world-writable, a non-regular
// file, an oversize file.
var ErrUnsafe = errors.New("unsafe identity file")

// UnsafeError names the path and the rule it broke.
type UnsafeError struct {
	Path string
	Rule string
}

func (e *UnsafeError) Error() string { return e.Path + ": " + e.Rule }

// Unwrap makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// Load reads and validates the record at Path. See LoadFrom.
func Load() (*Identity, error) { return LoadFrom(Dir) }

// LoadFrom reads and validates the record dir/identity.
//
// Contract: Box identity ("refuses the file unless the file and its
// directory belong to root and are not group- or world-writable"). It
// opens dir without following a symlink anywhere in the path
// (openat2 RESOLVE_NO_SYMLINKS; O_NOFOLLOW on the last component where
// openat2 is missing), then the file relative to that descriptor without
// following a symlink, and checks owner (uid 0), mode (no group or world
// write bit), type (directory, regular file) and size (MaxSize) with fstat
// on the open descriptors, so a rename between the check and the read
// cannot fool it: what was checked is what is read.
//
// Errors: a missing directory or file wraps fs.ErrNotExist; a refusal of
// the place is an *UnsafeError (ErrUnsafe); a bad record is a *FieldError
// (ErrInvalid), wrapped with the path.
func LoadFrom(dir string) (*Identity, error) {
	f, err := OpenFile(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if len(data) > MaxSize {
		return nil, &UnsafeError{f.Name(), fmt.Sprintf("grew past %d bytes while being read", MaxSize)}
	}
	id, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return id, nil
}

// OpenFile opens dir/identity for reading after every check of LoadFrom
// but the record's content, for a caller that wants the descriptor (to
// fstat it, or read it as it is). The caller closes it.
func OpenFile(dir string) (*os.File, error) {
	dfd, err := openDir(dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	if err := CheckDir(dfd, dir); err != nil {
		return nil, err
	}
	path := dir + "/" + File
	fd, err := openat(dfd, File, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, placeError(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &UnsafeError{path, "is not a regular file"}
	}
	if err := checkOwner(path, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Size > MaxSize {
		unix.Close(fd)
		return nil, &UnsafeError{path, fmt.Sprintf("is %d bytes; the limit is %d", st.Size, MaxSize)}
	}
	// Reads block from here on: it is a regular file.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// CheckDir checks an open directory descriptor: a directory, owned by
// root, not group- or world-writable. name is only for the error.
func CheckDir(dfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("fstat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &UnsafeError{name, "is not a directory"}
	}
	return checkOwner(name, &st)
}

func checkOwner(name string, st *unix.Stat_t) error {
	if st.Uid != 0 {
		return &UnsafeError{name, fmt.Sprintf("belongs to uid %d; it must belong to root", st.Uid)}
	}
	if st.Mode&0o022 != 0 {
		return &UnsafeError{name, fmt.Sprintf("is group- or world-writable (mode %04o); it must not be", st.Mode&0o7777)}
	}
	return nil
}

// openDir opens dir as a directory without following any symlink in it.
func openDir(dir string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(dir, int(how.Flags), 0)
	}
	if err != nil {
		return -1, placeError(dir, err)
	}
	return fd, nil
}

// openat opens name in the directory dfd without following a symlink and
// without leaving it.
// mode matters only with O_CREAT.
func openat(dfd int, name string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(mode)
	}
	fd, err := unix.Openat2(dfd, name, &how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Openat(dfd, name, flags|unix.O_NOFOLLOW, mode)
	}
	return fd, err
}

// placeError turns the errors of a no-symlink open into a sentence.
func placeError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		// ELOOP: O_NOFOLLOW or RESOLVE_NO_SYMLINKS met a symlink.
		return &UnsafeError{path, "is or passes through a symlink; symlinks are refused"}
	case errors.Is(err, unix.ENOTDIR):
		return &UnsafeError{path, "is not a directory"}
	case errors.Is(err, unix.ENXIO):
		return &UnsafeError{path, "is not a regular file"}
	}
	return &os.PathError{Op: "open", Path: path, Err: err}
}
