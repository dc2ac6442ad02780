package feature

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// recordFile is the launch's record in the run's state directory, which
// dispatch-tool reads and teardown removes with that directory.
const recordFile = "launch.json"

// Record is what a dispatcher needs of a launch: the result, the primary
// service and the users the provider user is resolved from.
type Record struct {
	Result
	Service       string `json:"service"`
	RemoteUser    string `json:"remote_user,omitempty"`
	ContainerUser string `json:"container_user,omitempty"`
}

// FacadeDir is where a run's generated files go.
func FacadeDir(root, runID string) string {
	return filepath.Join(rundir.StateDir(root, runID), "facade")
}

// WriteRecord stores rec durably, owner-only (rundir.WriteFile).
func WriteRecord(root, runID string, rec *Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return rundir.WriteFile(rundir.StateDir(root, runID), recordFile, append(data, '\n'))
}

// ReadRecord loads the run's launch record (opened without following
// symlinks); a run never launched wraps fs.ErrNotExist.
func ReadRecord(root, runID string) (*Record, error) {
	path := filepath.Join(rundir.StateDir(root, runID), recordFile)
	fd, err := rundir.OpenPath(path, unix.O_RDONLY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rec, nil
}
