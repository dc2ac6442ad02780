package vault

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// The file names inside the vault directory.
const (
	VaultSH = "vault.sh"
	Names   = "names"
	Keys    = "keys"
)

// Install makes f the vault at dir (/run/cocoonbox-vault) in one step.
//
// It writes the files (0644, each fsynced) into a fresh directory beside
// dir (.cocoonbox-vault.new-*, 0755), then swaps that directory with dir
// by renameat2(RENAME_EXCHANGE), and removes the old one, now under the
// fresh name. When dir does not exist yet, a plain rename puts it there.
//
// Why this design: a reader resolves the path /run/cocoonbox-vault/vault.sh
// once, when it opens the file, and gets one directory: the old one or the
// new one, never a mix, and each file is complete, since no file is ever
// written after its directory becomes visible. A reader that needs
// vault.sh and keys of one render opens the directory once (or cd's into
// it) and opens both relative to it: it then gets both from that render,
// or, when the render was replaced in between and the old directory
// already removed, ENOENT (read again), never two renders mixed. Both files
// name the render in their first line. A real directory, unlike a symlink
// flip, keeps /run/cocoonbox-vault what the contract says: a root-owned
// 0755 directory.
//
// Install must not run twice at once on one dir (the caller holds a lock).
func Install(dir string, f *Files) error {
	parent, base := filepath.Split(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, "."+base+".new-")
	if err != nil {
		return fmt.Errorf("create the new render's directory: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := writeFile(tmp, VaultSH, f.VaultSH); err != nil {
		return err
	}
	if err := writeFile(tmp, Names, f.Names); err != nil {
		return err
	}
	if f.Keys != nil {
		if err := writeFile(tmp, Keys, f.Keys); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := durable.SyncDir(tmp); err != nil {
		return err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOENT) {
		// No vault yet: put this one in place, refusing to replace one
		// that appeared meanwhile.
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE)
		if err == nil {
			done = true
			return durable.SyncDir(parent)
		}
	}
	if err != nil {
		return fmt.Errorf("swap %s into %s: %w", tmp, dir, err)
	}
	done = true
	// tmp now holds the previous render (or whatever was at dir).
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove the previous render (now %s): %w", tmp, err)
	}
	return durable.SyncDir(parent)
}

// writeFile creates dir/name 0644 with data, fsynced (durable.CreateAt:
// dir is the new render's, not yet in place).
func writeFile(dir, name string, data []byte) error {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := durable.CreateAt(dfd, name, durable.File{Data: data, Mode: 0o644}); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// ReadNames returns the names of the vault at dir (none when there is no
// vault yet). The file is opened without following a symlink.
func ReadNames(dir string) ([]string, error) {
	fd, err := os.OpenFile(filepath.Join(dir, Names), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	data, err := io.ReadAll(io.LimitReader(fd, 16<<20+1))
	if err != nil {
		return nil, err
	}
	if len(data) > 16<<20 {
		return nil, fmt.Errorf("%s is larger than 16 MiB", fd.Name())
	}
	return ParseNames(data), nil
}
