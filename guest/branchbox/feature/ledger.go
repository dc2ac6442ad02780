// The ledger (ledger.go) is a run's record of what BranchBox materialized, which
// teardown reads to remove exactly that (Contract: BranchBox managed
// runtime manifest, Security contract: "Teardown removes every recorded
// materialization"). It lives in <root>/state/<run_id>/ledger.json, owner
// only, beside what part 2 keeps there (the replay ledger), and is written
// the durable way: temp file, fsync, rename, directory fsync.

package feature

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/workspace"
)

// Ledger is what materialize did for one run.
type Ledger struct {
	RunID      string `json:"run_id"`
	Feature    string `json:"feature"`
	Version    string `json:"version"`
	OwnerUID   uint32 `json:"owner_uid"`
	Repository string `json:"repository"`
	// Workspace is the checkout, and whether it was delegated.
	Workspace *workspace.Result `json:"workspace"`
	// Sources are the materializations as checked (path, kind, dev, ino).
	Sources        []rundir.Source `json:"sources"`
	MaterializedAt time.Time       `json:"materialized_at"`
}

// LedgerPath is the ledger file.
func LedgerPath(root, runID string) string {
	return filepath.Join(rundir.StateDir(root, runID), "ledger.json")
}

// WriteLedger stores l durably (owner 0600 in 0700 directories).
func WriteLedger(root string, l *Ledger) error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return rundir.WriteFile(rundir.StateDir(root, l.RunID), "ledger.json", append(data, '\n'))
}

// ReadLedger loads the run's ledger; a missing one wraps fs.ErrNotExist.
func ReadLedger(root, runID string) (*Ledger, error) {
	path := LedgerPath(root, runID)
	fd, err := rundir.OpenPath(path, unix.O_RDONLY)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o077 != 0 || st.Nlink != 1 {
		return nil, branchbox.Refuse(branchbox.RuleOwnerOnly, path, "the ledger must be an owner-only regular file with one link")
	}
	data, err := io.ReadAll(io.LimitReader(f, branchbox.MaxAssignmentSize*4))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var l Ledger
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &l, nil
}
