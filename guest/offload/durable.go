package offload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// Every file under the state directory is written the durable way (temp
// file in the same directory, fsync, rename, fsync the directory), so a
// crash at any point leaves the old or the new record, never half of one
// (Contract: Offload, Directories: "the state layer saves it").

// WriteFile replaces path with data durably (internal/durable): a new file
// is 0600, a regular file there keeps its mode (git's HEAD and index,
// restored into a copy, stay as git made them).
func WriteFile(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		mode = st.Mode().Perm()
	}
	return durable.WriteFile(path, data, mode)
}

// WriteJSON is WriteFile of v as one JSON document and a newline.
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFile(path, append(data, '\n'))
}

// ReadJSON reads path into v; a missing file is os.ErrNotExist (wrapped).
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

// CreateFile creates path with data durably and fails with os.ErrExist
// when it exists: the temporary file is hard-linked to its name, which
// never replaces, so two writers of one seq cannot both win.
func CreateFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return fmt.Errorf("create a temporary file in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return durable.SyncDir(dir)
}

// MkdirPrivate makes dir and its missing parents 0700 and puts an existing
// dir's mode right.
func MkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod 0700 %s: %w", dir, err)
	}
	return nil
}
