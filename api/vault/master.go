package vault

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// MasterKeySize is the master key's length in bytes: an AES-256 key.
const MasterKeySize = 32

// MasterKey is the api's master key. Every replica must be given the same
// one: a state key sealed under another does not unseal (ErrWrongMasterKey).
type MasterKey struct {
	path string
	key  []byte
}

// Path is the file the key was read from.
func (m *MasterKey) Path() string { return m.path }

func (m *MasterKey) String() string { return "master key " + m.path }

// LoadMasterKey reads the master key at path: exactly MasterKeySize bytes,
// a regular file no group or other may read or write. With create, a
// missing file is made (32 random bytes, 0600, its directory 0700, the
// durable write; two apis making it at once end with the one that landed
// first); without, a missing file is an error. Every error names the path.
func LoadMasterKey(path string, create bool) (*MasterKey, error) {
	if create {
		if err := makeMasterKey(path); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the master key file %s is missing: every replica must be given the api's master key (secrets.master_key_file)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("the master key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the master key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the master key file %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the master key file %s has mode %04o: group and others must have no access (chmod 600)", path, st.Mode().Perm())
	}
	key := make([]byte, MasterKeySize+1)
	n, _ := f.ReadAt(key, 0)
	if n != MasterKeySize {
		return nil, fmt.Errorf("the master key file %s holds %d bytes, not %d (32 random bytes)", path, st.Size(), MasterKeySize)
	}
	return &MasterKey{path: path, key: key[:MasterKeySize]}, nil
}

func makeMasterKey(path string) error {
	dir, name := filepath.Split(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the master key's directory: %w", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there (or unreadable: LoadMasterKey says which)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	key := make([]byte, MasterKeySize)
	rand.Read(key)
	err = durable.WriteAt(dfd, name, durable.File{Data: key, Mode: 0o600, NoReplace: true})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("make the master key %s: %w", path, err)
	}
	return nil
}
