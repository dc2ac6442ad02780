package vault

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cocoonbox/cocoonbox/guest/vault/envfile"
	"golang.org/x/sys/unix"
)

// MaxEnvFileSize is the largest claim env file the vault reads (16 MiB).
// A larger one is refused as a whole and the last good render stays.
const MaxEnvFileSize = 16 << 20

// Stamp identifies one version of a file: a file replaced by a rename has
// another inode, one rewritten in place another size or mtime or ctime.
type Stamp struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime unix.Timespec
}

func stampOf(st *unix.Stat_t) Stamp {
	return Stamp{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim, Ctime: st.Ctim}
}

// StatFile returns the Stamp of path (not following a symlink).
func StatFile(path string) (Stamp, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return Stamp{}, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	return stampOf(&st), nil
}

// ErrNoEnvFile is returned by ReadEnvFile when the file is not there.
var ErrNoEnvFile = errors.New("no claim env file")

// ReadEnvFile reads the claim env file at path. It opens it without
// following a symlink and checks, on the descriptor, that it is a regular
// file of root's, not writable by group or others (the rules the identity
// reader holds its file to: anyone else who could write it could steer
// every login shell's environment), of at most MaxEnvFileSize bytes. It returns the contents and the
// file's Stamp as read. A missing file is ErrNoEnvFile (wrapped).
func ReadEnvFile(path string) ([]byte, Stamp, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, Stamp{}, fmt.Errorf("%s: %w", path, ErrNoEnvFile)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, Stamp{}, fmt.Errorf("%s is a symlink: the claim env must be a regular file", path)
	}
	if err != nil {
		return nil, Stamp{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, Stamp{}, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, Stamp{}, fmt.Errorf("%s is not a regular file (mode %o)", path, st.Mode)
	}
	if st.Uid != 0 {
		return nil, Stamp{}, fmt.Errorf("%s belongs to uid %d: the claim env must be root's", path, st.Uid)
	}
	if st.Mode&(unix.S_IWGRP|unix.S_IWOTH) != 0 {
		return nil, Stamp{}, fmt.Errorf("%s has mode %04o: the claim env must not be writable by group or others", path, st.Mode&0o7777)
	}
	if st.Size > MaxEnvFileSize {
		return nil, Stamp{}, fmt.Errorf("%s is %d bytes, larger than %d", path, st.Size, MaxEnvFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxEnvFileSize+1))
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxEnvFileSize {
		return nil, Stamp{}, fmt.Errorf("%s grew larger than %d bytes while read", path, MaxEnvFileSize)
	}
	return data, stampOf(&st), nil
}

// ParseClaimEnv reads the records out of a claim env file's contents:
// COCOONBOX_VAULT first, then COCOONBOX_CONNECT. An error (an unparsable
// file) means nothing should be rendered from it.
func ParseClaimEnv(data []byte) (*Records, error) {
	f, err := envfile.Parse(data)
	if err != nil {
		return nil, err
	}
	rs := &Records{}
	for _, src := range Sources {
		if v, ok := f.Lookup(string(src)); ok {
			rs.Add(src, v)
		}
	}
	return rs, nil
}
