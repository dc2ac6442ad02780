package packer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Back's work tree change is all or nothing (issue 22, Deliver 3): the
// new content is written aside first (git checkout-index into the
// back's stage, so the repository's own filters and eol settings apply),
// every path in its way is checked before anything moves, and the plan
// of the change is on disk before the first rename. Each old entry is
// renamed aside into the stage, each new one renamed into place; a
// failure, or the next back after a kill, renames everything back. The
// commit point is the stage's "done" file, made after the branch moved
// and before index.lock becomes the index: with it the change is
// finished, without it undone.
//
// The stage is <git dir>/cocoonbox-back/<id>/: plan.json, old/, new/,
// done.

// placePlan is plan.json: what a back's change moves, written before the
// first rename so that any later state can be undone from it.
type placePlan struct {
	ID string `json:"id"`
	// Removed are the work tree paths renamed aside into old/.
	Removed []string `json:"removed"`
	// Placed are the paths renamed into place from new/.
	Placed []string `json:"placed"`
	// MadeDirs are the directories made for Placed, parents first.
	MadeDirs []string `json:"made_dirs"`
	// GoneDirs are the directories that may go once empty (a directory
	// the box made a file, a parent left empty), with their modes.
	GoneDirs map[string]fs.FileMode `json:"gone_dirs"`
	// Move: the branch moves from Head to BoxHead.
	Move    bool   `json:"move"`
	Branch  string `json:"branch,omitempty"`
	Head    string `json:"head"`
	BoxHead string `json:"box_head,omitempty"`
	// Lock and Index are index.lock (held, the new index in it) and the
	// index.
	Lock  string `json:"lock"`
	Index string `json:"index"`
	// LockSum is the SHA-256 of the bytes the lock holds: a lock with
	// others is another git's, never touched.
	LockSum string `json:"lock_sum"`
	// Result is the merge's answer once done.
	Result *MergeResult `json:"result"`
}

// stageDir is <git dir>/cocoonbox-back/<id>.
func stageDir(top, id string) (string, error) {
	return gitcmd.GitPath(top, filepath.Join("cocoonbox-back", id))
}

// change is one path of the difference between two trees.
type change struct {
	path             string
	oldMode, newMode string
}

// treeChanges is git diff --raw between two trees, gitlinks left out (a
// submodule's commit is not a file to place), and the paths of keep.
func treeChanges(top, from, to string, keep []string) ([]change, error) {
	kept := map[string]bool{}
	for _, p := range keep {
		kept[p] = true
	}
	out, err := gitcmd.Raw(top, nil, nil, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", from, to)
	if err != nil {
		return nil, err
	}
	// -z --raw: ":<old mode> <new mode> <old> <new> <status>\0<path>\0".
	parts := strings.Split(string(out), "\x00")
	var cs []change
	for i := 0; i+1 < len(parts); i += 2 {
		f := strings.Fields(strings.TrimPrefix(parts[i], ":"))
		if len(f) < 5 {
			continue
		}
		if f[0] == "160000" || f[1] == "160000" || kept[parts[i+1]] {
			continue
		}
		cs = append(cs, change{path: parts[i+1], oldMode: f[0], newMode: f[1]})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].path < cs[j].path })
	return cs, nil
}

// stepHook, when set (tests only), runs at each named step of back's
// merge; an error it returns is that step's failure.
var stepHook func(step string) error

func hookAt(step string) error {
	if stepHook != nil {
		return stepHook(step)
	}
	return nil
}

// planPlace checks the work tree for the change from tree from to tree
// to and writes the new entries into the stage's new/: a path in the way
// that the change does not remove (an ignored d/build.log where the box
// made d a file, an untracked file where the box adds one) is a
// *Refusal naming it, with nothing changed. It returns every path the
// change touches.
func planPlace(top, stage, from, to string, keep []string, pl *placePlan) ([]string, error) {
	cs, err := treeChanges(top, from, to, keep)
	if err != nil {
		return nil, err
	}
	changed := []string{}
	for _, c := range cs {
		changed = append(changed, c.path)
	}
	removed := map[string]bool{}
	var placed []string
	skip := skipWorktree(top, "")
	for _, c := range cs {
		fi, err := os.Lstat(filepath.Join(top, c.path))
		if skip[c.path] && errors.Is(err, fs.ErrNotExist) {
			continue // outside a sparse checkout's cone: the index has it
		}
		switch {
		case c.oldMode == "000000":
		case errors.Is(err, fs.ErrNotExist):
			// Deleted here already: nothing to move aside.
		case err != nil:
			return nil, err
		case fi.IsDir():
			return nil, &Refusal{Msg: fmt.Sprintf("%s is a directory here where the box changed a file of that name; nothing changed", c.path)}
		default:
			removed[c.path] = true
			pl.Removed = append(pl.Removed, c.path)
		}
		if c.newMode != "000000" {
			placed = append(placed, c.path)
		}
	}
	pl.Placed, pl.GoneDirs = placed, map[string]fs.FileMode{}
	made := map[string]bool{}
	var inWay []string
	for _, p := range placed {
		parts := strings.Split(p, "/")
		for i := 1; i < len(parts); i++ {
			q := strings.Join(parts[:i], "/")
			fi, err := os.Lstat(filepath.Join(top, q))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				if !made[q] {
					made[q] = true
					pl.MadeDirs = append(pl.MadeDirs, q)
				}
			case err != nil:
				return nil, err
			case !fi.IsDir() && !removed[q]:
				inWay = append(inWay, q)
			}
		}
		fi, err := os.Lstat(filepath.Join(top, p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		case fi.IsDir():
			// The box made p a file: every file under p must go with the
			// change, and p's directories go once empty.
			filepath.WalkDir(filepath.Join(top, p), func(path string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(top, path)
				if err != nil {
					inWay = append(inWay, rel)
					return nil
				}
				if d.IsDir() {
					if info, err := d.Info(); err == nil {
						pl.GoneDirs[rel] = info.Mode().Perm()
					}
				} else if !removed[rel] {
					inWay = append(inWay, rel)
				}
				return nil
			})
		case !removed[p]:
			inWay = append(inWay, p)
		}
	}
	if len(inWay) > 0 {
		sort.Strings(inWay)
		return nil, &Refusal{Msg: fmt.Sprintf("the box's change does not apply to your work tree: %s is in the way (not in the box's copy: untracked or git-ignored here); move it away and run cocoonbox back again; nothing changed", strings.Join(first(inWay, 5), ", "))}
	}
	for _, p := range pl.Removed {
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			if fi, err := os.Lstat(filepath.Join(top, d)); err == nil && fi.IsDir() {
				pl.GoneDirs[d] = fi.Mode().Perm()
			}
		}
	}
	return changed, checkoutInto(top, filepath.Join(stage, "new"), to, placed)
}

// checkoutInto writes the paths of tree into dir as git checks them out
// here (filters, eol, modes, symlinks), through a temporary index.
func checkoutInto(top, dir, tree string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "cocoonbox-back-new-*")
	if err != nil {
		return err
	}
	tmp.Close()
	os.Remove(tmp.Name())
	defer os.Remove(tmp.Name())
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	if _, err := gitcmd.Run(top, env, nil, "read-tree", tree); err != nil {
		return err
	}
	in := strings.Join(paths, "\x00") + "\x00"
	if _, err := gitcmd.Run(top, env, strings.NewReader(in), "checkout-index", "-z", "--stdin", "-f", "--prefix="+dir+"/"); err != nil {
		return fmt.Errorf("write the box's files aside: %w", err)
	}
	return nil
}

// place does the plan's renames: the old entries aside, the new ones in,
// then the directories left empty away. A failure is undone before it
// returns.
func place(top, stage string, pl *placePlan) (err error) {
	defer func() {
		if err != nil {
			if uerr := unplace(top, stage, pl); uerr != nil {
				err = fmt.Errorf("%w; and undoing it: %v (the plan is %s)", err, uerr, filepath.Join(stage, "plan.json"))
			}
		}
	}()
	half := len(pl.Removed) / 2
	for i, p := range pl.Removed {
		if i == half {
			if err := hookAt("apply"); err != nil {
				return err
			}
		}
		if err := renameMk(filepath.Join(top, p), filepath.Join(stage, "old", p)); err != nil {
			return err
		}
	}
	for _, p := range pl.Placed {
		dst := filepath.Join(top, p)
		if _, ok := pl.GoneDirs[p]; ok {
			removeEmptyDirs(top, p)
		}
		if err := renameMk(filepath.Join(stage, "new", p), dst); err != nil {
			return err
		}
	}
	var gone []string
	for d := range pl.GoneDirs {
		gone = append(gone, d)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(gone))) // children first
	for _, d := range gone {
		if fi, err := os.Lstat(filepath.Join(top, d)); err == nil && fi.IsDir() {
			os.Remove(filepath.Join(top, d)) // only when empty
		}
	}
	return nil
}

// removeEmptyDirs removes the directory p of top and its empty
// subdirectories, children first.
func removeEmptyDirs(top, p string) {
	var dirs []string
	filepath.WalkDir(filepath.Join(top, p), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

// unplace undoes place from any state it stopped in (a failure, or a
// kill: the next back runs it), each step only when still to do, so it
// can itself be cut short and run again.
func unplace(top, stage string, pl *placePlan) error {
	var errs []error
	for i := len(pl.Placed) - 1; i >= 0; i-- {
		p := pl.Placed[i]
		src, dst := filepath.Join(stage, "new", p), filepath.Join(top, p)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Lstat(dst); err == nil {
				errs = append(errs, renameMk(dst, src))
			}
		}
	}
	for i := len(pl.MadeDirs) - 1; i >= 0; i-- {
		os.Remove(filepath.Join(top, pl.MadeDirs[i]))
	}
	var gone []string
	for d := range pl.GoneDirs {
		gone = append(gone, d)
	}
	sort.Strings(gone) // parents first
	for _, d := range gone {
		path := filepath.Join(top, d)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(path, pl.GoneDirs[d]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range pl.Removed {
		src := filepath.Join(stage, "old", p)
		if _, err := os.Lstat(src); err == nil {
			errs = append(errs, renameMk(src, filepath.Join(top, p)))
		}
	}
	return errors.Join(errs...)
}

// renameMk renames src to dst, making dst's directories.
func renameMk(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(src, dst)
}

func writePlan(stage string, pl *placePlan) error {
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return err
	}
	return offload.WriteJSON(filepath.Join(stage, "plan.json"), pl)
}

// RecoverBack finishes or undoes a back of offload id that stopped
// inside its change of the work tree (killed, or its undo failed): with
// the stage's done file the change is finished (index.lock, ours, becomes
// the index) and its result returned; without it every path, the branch
// and index.lock are put back as they were and the result is nil. No
// stage: nil, nothing to do.
func RecoverBack(top, id string) (*MergeResult, error) {
	stage, err := stageDir(top, id)
	if err != nil {
		return nil, err
	}
	var pl placePlan
	if err := offload.ReadJSON(filepath.Join(stage, "plan.json"), &pl); errors.Is(err, fs.ErrNotExist) {
		return nil, os.RemoveAll(stage)
	} else if err != nil {
		return nil, fmt.Errorf("the stopped back's plan: %w", err)
	}
	if fileExists(filepath.Join(stage, "done")) {
		if ours(&pl) {
			if err := os.Rename(pl.Lock, pl.Index); err != nil {
				return nil, fmt.Errorf("finish the stopped back (put the new index in place): %w", err)
			}
		}
		return pl.Result, os.RemoveAll(stage)
	}
	if pl.Move {
		if cur, _ := gitcmd.Run(top, nil, nil, "rev-parse", "-q", "--verify", pl.Branch); cur == pl.BoxHead {
			if _, err := gitcmd.Run(top, nil, nil, "update-ref", "-m", "cocoonbox back "+id+": undone", pl.Branch, pl.Head, pl.BoxHead); err != nil {
				return nil, fmt.Errorf("put %s back at %s: %w", pl.Branch, pl.Head, err)
			}
		}
	}
	if err := unplace(top, stage, &pl); err != nil {
		return nil, fmt.Errorf("undo the stopped back (the plan is %s): %w", filepath.Join(stage, "plan.json"), err)
	}
	if ours(&pl) {
		os.Remove(pl.Lock)
	}
	return nil, os.RemoveAll(stage)
}

// ours says whether the plan's index.lock is there with the bytes this
// back wrote into it.
func ours(pl *placePlan) bool {
	data, err := os.ReadFile(pl.Lock)
	return err == nil && pl.LockSum != "" && sum(data) == pl.LockSum
}

func sum(data []byte) string { s := sha256.Sum256(data); return hex.EncodeToString(s[:]) }
