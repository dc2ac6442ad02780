// Package durable is the one durable write of the repository: a file others
// read is replaced the safe way, a temporary file in the same directory,
// owner and mode set on its descriptor, fsync, rename over the name, fsync
// the directory. A reader sees the old file or the new one, never half, and
// a crash leaves one of them (DESIGN.md, "Conventions").
//
// renameio (on the design card) is not used for it: it does not fsync the
// directory, so a crash can lose the rename, and it works on path names,
// where the guest's writers must stay on a directory descriptor they
// checked (openat2, no symlinks) and give the file to a user on the
// descriptor (guest/identity/write.go is the model).
package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotSynced marks an error that came after the rename: the new file is
// in place, but the directory's fsync failed, so a crash may bring the old
// one back.
var ErrNotSynced = errors.New("the directory was not fsynced")

// File is what WriteAt writes.
type File struct {
	// Data is the whole content.
	Data []byte
	// Mode is the file's permission bits, set with fchmod on the
	// descriptor (the umask does not narrow them).
	Mode os.FileMode
	// Chown gives the file to UID and GID with fchown on the descriptor
	// before its mode is set (a root helper writing a user's file).
	Chown    bool
	UID, GID int
	// Temp names the temporary file in the directory; empty is
	// ".NAME.tmp-" and 12 random hex digits. A writer that cleans up after
	// killed writers by a pattern names its own.
	Temp string
	// NoReplace refuses to replace an existing name (renameat2
	// RENAME_NOREPLACE): the error is then unix.EEXIST, wrapped.
	NoReplace bool
}

// WriteAt writes f as name in the directory open at dfd, the durable way:
// the temporary file is created with O_EXCL and O_NOFOLLOW relative to
// dfd, so nothing on the way is a name resolved again. On an error before
// the rename the temporary file is removed and the old file is untouched;
// an error after it wraps ErrNotSynced. Errors name the step and the
// temporary file, not the directory (the caller knows its path).
func WriteAt(dfd int, name string, f File) error {
	tmp := f.Temp
	if tmp == "" {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		tmp = "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	}
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(f.Mode.Perm()))
	if err != nil {
		return fmt.Errorf("create the temporary file %s: %w", tmp, err)
	}
	if err := fill(fd, f); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("%s: %w", tmp, err)
	}
	flags := uint(0)
	if f.NoReplace {
		flags = unix.RENAME_NOREPLACE
	}
	if err := unix.Renameat2(dfd, tmp, dfd, name, flags); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("rename %s to %s: %w", tmp, name, err)
	}
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("fsync the directory of %s: %w: %w", name, ErrNotSynced, err)
	}
	return nil
}

// CreateAt creates name in the directory open at dfd (O_EXCL, O_NOFOLLOW)
// with f's data, owner and mode, fsynced: for a directory nobody reads yet
// (it is renamed into place once complete), where no temporary file is
// needed. f.Temp and f.NoReplace do not apply; the caller fsyncs the
// directory when it has made all of it. On an error the file is removed.
func CreateAt(dfd int, name string, f File) error {
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(f.Mode.Perm()))
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := fill(fd, f); err != nil {
		_ = unix.Unlinkat(dfd, name, 0)
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// fill writes f's data, owner and mode to fd, fsyncs and closes it.
func fill(fd int, f File) error {
	file := os.NewFile(uintptr(fd), "")
	_, err := file.Write(f.Data)
	if err != nil {
		err = fmt.Errorf("write: %w", err)
	}
	if err == nil && f.Chown {
		if err = unix.Fchown(fd, f.UID, f.GID); err != nil {
			err = fmt.Errorf("chown %d:%d: %w", f.UID, f.GID, err)
		}
	}
	if err == nil {
		if err = unix.Fchmod(fd, uint32(f.Mode.Perm())); err != nil {
			err = fmt.Errorf("chmod %04o: %w", f.Mode.Perm(), err)
		}
	}
	if err == nil {
		if err = file.Sync(); err != nil {
			err = fmt.Errorf("fsync: %w", err)
		}
	}
	if cerr := file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return err
}

// WriteFile replaces path with data, mode set on the descriptor, durably
// (WriteAt in path's directory). Errors name path.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("write %s: open its directory: %w", path, err)
	}
	defer unix.Close(dfd)
	if err := WriteAt(dfd, filepath.Base(path), File{Data: data, Mode: mode}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SyncDir fsyncs the directory dir, so a rename or link in it survives a
// crash. A file system that cannot fsync a directory (EINVAL) is no error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to fsync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// SyncFile fsyncs the file at path: one another program wrote (tar), made
// durable before it is renamed into place.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s to fsync it: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
