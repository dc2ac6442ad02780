package identity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// Write validates id and writes it as dir/identity (Contract: Box
// identity): it makes sure dir is a directory owned by root with mode 0755
// (creating it, or fixing its mode; refusing a symlink or a directory of
// another owner), writes the canonical record to a new temporary file in
// dir, sets it to root:root 0644 on the descriptor, fsyncs it, renames it
// over dir/identity and fsyncs dir. Every step works
// on the directory's descriptor, never its name, so the checked directory
// is the one written to. On any error the previous file is untouched.
//
// Writers take turns (flock on the directory), so a temporary file of the
// pattern .identity.<12 hex> that is there when a writer holds the lock
// was left by a writer killed mid-write, and is removed (200 kills at
// random points left 3 behind before this).
//
// The write itself is internal/durable's, on the checked directory's
// descriptor (renameio works on names; the directory check must hold for
// the write).
func Write(dir string, id *Identity) error {
	if err := id.Validate(); err != nil {
		return err
	}
	data := id.Marshal()
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	dfd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("fstat %s: %w", dir, err)
	}
	if st.Uid != 0 {
		return &UnsafeError{dir, fmt.Sprintf("belongs to uid %d; it must belong to root", st.Uid)}
	}
	if st.Mode&0o7777 != 0o755 {
		if err := unix.Fchmod(dfd, 0o755); err != nil {
			return fmt.Errorf("chmod 0755 %s: %w", dir, err)
		}
	}
	// Released when dfd is closed, or when a killed writer's is.
	if err := unix.Flock(dfd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := removeStale(dfd); err != nil {
		return fmt.Errorf("remove the temporary files of killed writers from %s: %w", dir, err)
	}

	var rnd [tmpRandom]byte
	_, _ = rand.Read(rnd[:])
	tmp := tmpPrefix + hex.EncodeToString(rnd[:])
	err = durable.WriteAt(dfd, File, durable.File{Data: data, Mode: 0o644, Chown: true, UID: 0, GID: 0, Temp: tmp})
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", dir, File, err)
	}
	return nil
}

// A writer's temporary file is tmpPrefix and tmpRandom random bytes in hex.
const (
	tmpPrefix = ".identity."
	tmpRandom = 6
)

// removeStale removes the temporary files of the writer's own pattern from
// the directory dfd; the caller holds the writers' lock, so none of them
// is being written.
func removeStale(dfd int) error {
	d, err := unix.Dup(dfd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(d), "identity directory")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, tmpPrefix)
		if !ok || len(rest) != 2*tmpRandom {
			continue
		}
		if _, err := hex.DecodeString(rest); err != nil {
			continue
		}
		if err := unix.Unlinkat(dfd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}
