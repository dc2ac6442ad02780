// Teardown (teardown.go, receipt.go) removes a run (Contract: BranchBox managed runtime
// manifest, Security contract: "Teardown removes every recorded
// materialization, including non-empty shared directories and Unix
// sockets, every exact request volume, and the replay ledger. Any source
// that cannot be removed is reported as residue and prevents a
// residue-free teardown receipt.") and writes its receipt.

package feature

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/workspace"
)

// Receipt is teardown's durable account, also printed by --json.
type Receipt struct {
	RunID   string `json:"run_id"`
	Feature string `json:"feature"`
	Version string `json:"version"`
	// Removed names every path removed, depth first.
	Removed []string `json:"removed"`
	// Residue is what could not be removed, with why.
	Residue     []Residue `json:"residue"`
	ResidueFree bool      `json:"residue_free"`
	TornDownAt  time.Time `json:"torn_down_at"`
	// Path is where the receipt is stored: <root>/receipts/<run_id>.json.
	Path string `json:"receipt_path"`
}

// Residue is one path teardown could not remove.
type Residue struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// Teardown tears the run down: the workspace its ledger records (then `git
// worktree prune`), the run directory with every source in it, and the
// state directory with the ledger; then it writes the receipt.
//
// A version 3 run, or one whose version cannot be read, needs force
// (Contract: "managed in-guest teardown requires --force"; no
// dirty-worktree check is made: commit what you want to keep first).
//
// removeEngine, when not nil, removes the run's objects in the Docker
// engine first (its containers hold binds of the run's sources): each is
// named in the receipt as "docker container NAME" (network, volume),
// removed or residue.
//
// Errors: a RuleForce refusal; fs.ErrNotExist when there is neither a
// ledger nor a run directory; an error writing the receipt. Residue is
// not an error: the receipt says it.
func Teardown(opt branchbox.Options, runID string, feature string, force bool, removeEngine func() ([]engine.Removed, error)) (*Receipt, error) {
	root := opt.Root
	if root == "" {
		root = branchbox.Root
	}
	rc := &Receipt{RunID: runID, Feature: feature, Removed: []string{}, Residue: []Residue{}}
	l, err := ReadLedger(root, runID)
	switch {
	case err == nil:
		rc.Version = l.Version
		if l.Feature != feature {
			return nil, branchbox.Refuse(branchbox.RuleRunDirectory, LedgerPath(root, runID), "is the ledger of feature %q, not %q", l.Feature, feature)
		}
	case errors.Is(err, fs.ErrNotExist):
		opt.SkipExpiry = true
		if r, lerr := rundir.Load(opt, runID); lerr == nil {
			rc.Version = r.Assignment.Version
		} else if _, serr := os.Lstat(opt.RunDir(runID)); errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("run %s: no ledger and no run directory: %w", runID, fs.ErrNotExist)
		}
	default:
		return nil, err
	}
	if !force && rc.Version != "1" && rc.Version != "2" {
		return nil, branchbox.Refuse(branchbox.RuleForce, runID, "a managed (version 3, or unreadable) run needs teardown --force: its consumer could edit the shared Git metadata; BranchBox makes no dirty-worktree check, so commit what you want to keep first")
	}
	if removeEngine != nil {
		objects, err := removeEngine()
		for _, o := range objects {
			if o.Err != nil {
				rc.left("docker "+o.Object, o.Err)
			} else {
				rc.Removed = append(rc.Removed, "docker "+o.Object)
			}
		}
		if err != nil {
			rc.left("docker run "+runID, err)
		}
	}
	if l != nil && l.Workspace != nil {
		rc.tree(l.Workspace.Path)
		rc.prune(l)
	}
	rc.tree(opt.RunDir(runID))
	rc.tree(rundir.StateDir(root, runID))
	rc.ResidueFree = len(rc.Residue) == 0
	rc.TornDownAt = time.Now().UTC()
	rc.Path = filepath.Join(root, "receipts", runID+".json")
	if err := rc.write(); err != nil {
		return rc, err
	}
	return rc, nil
}

// tree removes path and everything below it without following a symlink
// (a symlink is removed itself), recording each path removed or left.
func (rc *Receipt) tree(path string) {
	pfd, err := rundir.OpenPath(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return
	}
	if err != nil {
		rc.left(path, err)
		return
	}
	defer unix.Close(pfd)
	rc.at(pfd, filepath.Base(path), path)
}

func (rc *Receipt) at(dfd int, name, path string) {
	err := unix.Unlinkat(dfd, name, 0)
	switch {
	case err == nil:
		rc.Removed = append(rc.Removed, path)
		return
	case errors.Is(err, unix.ENOENT):
		return
	case !errors.Is(err, unix.EISDIR):
		rc.left(path, err)
		return
	}
	fd, err := rundir.OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		rc.left(path, err)
		return
	}
	d := os.NewFile(uintptr(fd), path)
	names, err := d.Readdirnames(-1)
	if err != nil {
		rc.left(path, err)
	}
	for _, n := range names {
		rc.at(fd, n, path+"/"+n)
	}
	d.Close()
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil {
		rc.left(path, err)
		return
	}
	rc.Removed = append(rc.Removed, path)
}

func (rc *Receipt) left(path string, err error) {
	rc.Residue = append(rc.Residue, Residue{Path: path, Error: err.Error()})
}

// prune drops the removed worktree's record from the shared Git
// metadata, as the runtime owner; what it cannot drop is residue.
func (rc *Receipt) prune(l *Ledger) {
	name := filepath.Join(l.Workspace.GitDir, "worktrees", filepath.Base(l.Workspace.Path))
	if out, err := workspace.Git(l.Repository, l.OwnerUID, "worktree", "prune"); err != nil {
		rc.left(name, fmt.Errorf("git worktree prune: %w: %s", err, out))
		return
	}
	if _, err := os.Lstat(name); err == nil {
		rc.left(name, errors.New("git worktree prune left it"))
	} else {
		rc.Removed = append(rc.Removed, name)
	}
}
