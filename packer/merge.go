package packer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// The cases of back's merge (Contract: Offload, Back, Mac side, step 4).
const (
	CaseFastForward = "fast-forward"
	CaseMerge       = "merge"
	CaseBranch      = "branch"
)

// MergeInput is what back's merge works on, all in the host repository
// at Top: S (refs/cocoonbox/base/<id>), S′ (refs/cocoonbox/back/<id>,
// fetched) and the box's branch head (refs/cocoonbox/box/<branch>, empty
// when HEAD is detached or the box has no such branch).
type MergeInput struct {
	Top, ID            string
	S, SPrime, BoxHead string
	// Now stamps the branch cocoonbox/back-<UTC yyyymmddThhmmssZ>.
	Now time.Time
	// Keep are paths back never writes: the opted-in file: secrets (a
	// link to the box's tmpfs in its copy).
	Keep []string
}

// MergeResult says what back did to the repository.
type MergeResult struct {
	// Case is fast-forward, merge or branch.
	Case string `json:"case"`
	// PreBack is refs/cocoonbox/pre-back/<id>, naming the old HEAD.
	PreBack string `json:"pre_back"`
	// MovedTo is the box HEAD the branch moved to, when it moved.
	MovedTo string `json:"moved_to,omitempty"`
	// Branch is cocoonbox/back-<stamp> at S′ (the branch case).
	Branch string `json:"branch,omitempty"`
	// Reason is why the branch case was taken.
	Reason string `json:"reason,omitempty"`
	// Applied are the work tree's paths the merge changed, uncommitted.
	Applied []string `json:"applied"`
	// Later is the box's branch head when the agent committed after its
	// back: those commits are not brought (S′ is the back) and stay at
	// refs/cocoonbox/box/<branch>.
	Later string `json:"later,omitempty"`
}

// Merge brings S′ into the repository against S, never touching the
// user's uncommitted work:
//   - fast-forward when HEAD is still S's parent and the work tree still
//     equals S: the work tree moves from S to S′;
//   - else a clean merge of S′ into HEAD with S as base (git merge-tree
//     --write-tree, on two commits whose one parent is S, since git 2.39
//     has no --merge-base) is applied uncommitted, unless it would change a
//     path the user changed since HEAD (staged, unstaged or untracked);
//   - else the branch cocoonbox/back-<stamp> at S′, the tree untouched.
//
// In the first two, when HEAD is still S's parent on a branch and the box
// HEAD descends from it, the branch moves to the box HEAD (the box's
// commits stay commits): refs/cocoonbox/pre-back/<id> names the old HEAD
// first (in every case), the new index (the box HEAD's tree with the
// user's staged changes carried over where the box's commits left the path
// alone) is built aside and held as index.lock before the work tree
// changes. A held index.lock, or a patch that does not apply, is a
// *Refusal with nothing changed.
func Merge(in MergeInput) (*MergeResult, error) {
	g := func(args ...string) (string, error) { return gitcmd.Run(in.Top, nil, nil, args...) }
	head, err := g("rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, fmt.Errorf("the repository's HEAD: %w", err)
	}
	branch, _ := g("symbolic-ref", "-q", "HEAD")
	sParent, _ := g("rev-parse", "--verify", "-q", in.S+"^")
	sTree, err := g("rev-parse", in.S+"^{tree}")
	if err != nil {
		return nil, fmt.Errorf("the base S %s: %w", in.S, err)
	}
	spTree, err := g("rev-parse", in.SPrime+"^{tree}")
	if err != nil {
		return nil, fmt.Errorf("the box's S′ %s: %w", in.SPrime, err)
	}
	// A back of this offload that stopped inside its change (killed) is
	// finished or undone first.
	if done, err := RecoverBack(in.Top, in.ID); err != nil || done != nil {
		return done, err
	}
	res := &MergeResult{PreBack: "refs/cocoonbox/pre-back/" + in.ID, Applied: []string{}}
	if lock, _ := gitcmd.GitPath(in.Top, "index.lock"); fileExists(lock) {
		return nil, lockHeld(lock)
	}
	if err := hookAt("pre-back"); err != nil {
		return nil, err
	}
	if _, err := g("update-ref", "-m", "cocoonbox back "+in.ID, res.PreBack, head); err != nil {
		return nil, err
	}
	// The branch moves to the box HEAD that S′ was made on: S′ itself when
	// it is a commit of the box's branch, else its parent. Commits the
	// agent made after its back are not S′'s and stay at
	// refs/cocoonbox/box/<branch> (moving to them would put S′'s older
	// tree under a newer HEAD, their change shown as reverted).
	if in.BoxHead != "" && !isAncestor(in.Top, in.SPrime, in.BoxHead) {
		if at, err := g("rev-parse", "--verify", "-q", in.SPrime+"^1"); err == nil && at != in.BoxHead {
			res.Later = in.BoxHead
			in.BoxHead = at
		}
	} else if in.BoxHead != "" && in.BoxHead != in.SPrime {
		res.Later = in.BoxHead
		in.BoxHead = in.SPrime
	}
	canMove := branch != "" && in.BoxHead != "" && head == sParent && isAncestor(in.Top, head, in.BoxHead)

	tree, err := gitcmd.SnapshotTree(in.Top, in.Keep...)
	if err != nil {
		return nil, err
	}
	if head == sParent && tree == sTree {
		res.Case = CaseFastForward
		return res, apply(in, res, sTree, spTree, head, branch, canMove)
	}
	if err := hookAt("merge-tree"); err != nil {
		return nil, err
	}
	merged, conflict, err := mergeTree(in, head)
	if err != nil {
		return nil, err
	}
	if conflict != "" {
		return branchCase(in, res, conflict)
	}
	headTree, _ := g("rev-parse", "HEAD^{tree}")
	changes, err := gitcmd.Paths(in.Top, nil, nil, "diff", "--name-only", "-z", "--no-renames", headTree, merged)
	if err != nil {
		return nil, err
	}
	userChanged, err := changedSinceHead(in.Top)
	if err != nil {
		return nil, err
	}
	var touched []string
	keep := map[string]bool{}
	for _, p := range in.Keep {
		keep[p] = true
	}
	for _, p := range changes {
		if userChanged[p] && !keep[p] {
			touched = append(touched, p)
		}
	}
	if len(touched) > 0 {
		return branchCase(in, res, "the merge would change "+strings.Join(first(touched, 5), ", ")+", which you changed since HEAD")
	}
	res.Case = CaseMerge
	return res, apply(in, res, headTree, merged, head, branch, canMove)
}

// mergeTree merges S′ into HEAD with S as the one base: the merged tree,
// or why it conflicts. Exit status 1 is a conflict whatever the conflict
// list says (a rename-only conflict lists none).
func mergeTree(in MergeInput, head string) (tree, conflict string, err error) {
	g := func(args ...string) (string, error) { return gitcmd.Run(in.Top, nil, nil, args...) }
	ours, err := g("commit-tree", head+"^{tree}", "-p", in.S, "-m", "cocoonbox back: ours")
	if err != nil {
		return "", "", err
	}
	theirs, err := g("commit-tree", in.SPrime+"^{tree}", "-p", in.S, "-m", "cocoonbox back: the box")
	if err != nil {
		return "", "", err
	}
	out, err := g("merge-tree", "--write-tree", "--name-only", ours, theirs)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return strings.SplitN(out, "\n", 2)[0], "", nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		lines := strings.Split(out, "\n")
		var paths []string
		for _, l := range lines[1:] {
			if l == "" {
				break
			}
			paths = append(paths, l)
		}
		if len(paths) == 0 {
			return "", "the merge conflicts (git merge-tree exit 1 with no conflicted path: a rename or directory conflict)", nil
		}
		return "", "the merge conflicts in " + strings.Join(first(paths, 5), ", "), nil
	}
	return "", "", fmt.Errorf("merge S′ into HEAD: %w", err)
}

func branchCase(in MergeInput, res *MergeResult, reason string) (*MergeResult, error) {
	res.Case, res.Reason = CaseBranch, reason
	res.Branch = "cocoonbox/back-" + in.Now.UTC().Format("20060102T150405Z")
	if _, err := gitcmd.Run(in.Top, nil, nil, "update-ref", "-m", "cocoonbox back "+in.ID, "refs/heads/"+res.Branch, in.SPrime, ""); err != nil {
		return nil, fmt.Errorf("make the branch %s at S′: %w", res.Branch, err)
	}
	return res, nil
}

// apply changes the work tree from tree from to tree to, uncommitted,
// all or nothing (place.go): index.lock is held all along; with move it
// holds the new index and the branch moves to the box HEAD before the
// lock becomes the index. Whatever fails, the work tree, the index and
// the branch are as they were when it returns.
func apply(in MergeInput, res *MergeResult, from, to, head, branch string, move bool) error {
	lockPath, err := gitcmd.GitPath(in.Top, "index.lock")
	if err != nil {
		return err
	}
	indexPath, err := gitcmd.GitPath(in.Top, "index")
	if err != nil {
		return err
	}
	stage, err := stageDir(in.Top, in.ID)
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(lockPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return lockHeld(lockPath)
	}
	if err != nil {
		return fmt.Errorf("take %s: %w", lockPath, err)
	}
	planned := false
	defer func() {
		lock.Close()
		if !planned {
			os.Remove(lockPath)
			os.RemoveAll(stage)
		}
	}()
	var index []byte
	if move {
		index, err = carriedIndex(in, head, indexPath)
	} else {
		index, err = os.ReadFile(indexPath)
	}
	if err != nil {
		return err
	}
	if _, err := lock.Write(index); err != nil {
		return fmt.Errorf("write %s: %w", lockPath, err)
	}
	if err := lock.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", lockPath, err)
	}
	// The plan names the lock and its bytes from here on, so the next back
	// removes (or puts in place) the lock a kill leaves, and only that one.
	pl := &placePlan{ID: in.ID, Move: move, Branch: branch, Head: head, BoxHead: in.BoxHead, Lock: lockPath, Index: indexPath, LockSum: sum(index)}
	if err := writePlan(stage, pl); err != nil {
		return err
	}
	if res.Applied, err = planPlace(in.Top, stage, from, to, in.Keep, pl); err != nil {
		return err
	}
	if move {
		res.MovedTo = in.BoxHead
	}
	pl.Result = res
	if err := writePlan(stage, pl); err != nil {
		return err
	}
	planned = true
	// From here on a failure is undone from the plan, as the next back
	// undoes a kill.
	undo := func(step string, err error) error {
		if _, uerr := RecoverBack(in.Top, in.ID); uerr != nil {
			return fmt.Errorf("%s: %w; undoing it failed too: %v", step, err, uerr)
		}
		return &Undone{Step: step, Err: err}
	}
	if err := place(in.Top, stage, pl); err != nil {
		return undo("apply", err)
	}
	if move {
		if err := hookAt("branch-move"); err != nil {
			return undo("branch move", err)
		}
		if _, err := gitcmd.Run(in.Top, nil, nil, "update-ref", "-m", "cocoonbox back "+in.ID, branch, in.BoxHead, head); err != nil {
			return undo("branch move", fmt.Errorf("move %s to the box HEAD: %w", branch, err))
		}
	}
	if err := hookAt("index-swap"); err != nil {
		return undo("index swap", err)
	}
	// The commit point: with done, the next back finishes this one.
	if err := offload.WriteFile(filepath.Join(stage, "done"), nil); err != nil {
		return undo("index swap", err)
	}
	if err := hookAt("after-commit"); err != nil {
		return err
	}
	if err := lock.Close(); err != nil {
		return err
	}
	if err := os.Rename(lockPath, indexPath); err != nil {
		return fmt.Errorf("put the new index in place (the next cocoonbox back finishes it): %w", err)
	}
	return nil
}

// Undone is a step of back's merge that failed after the work tree
// began to change, and was undone: the work tree, the index, HEAD and the
// branches are as they were.
type Undone struct {
	Step string
	Err  error
}

func (u *Undone) Error() string {
	return u.Step + ": " + u.Err.Error() + "; undone: your work tree, index, HEAD and branches are as they were"
}

func (u *Undone) Unwrap() error { return u.Err }

// carriedIndex is the index after the branch moves: the box HEAD's tree,
// then the user's staged entries of every path the box's commits did not
// change (a staged removal stays removed).
func carriedIndex(in MergeInput, head, indexPath string) ([]byte, error) {
	tmp, err := os.CreateTemp("", "cocoonbox-back-index-*")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	env := []string{"GIT_INDEX_FILE=" + tmp.Name()}
	if _, err := gitcmd.Run(in.Top, env, nil, "read-tree", in.BoxHead); err != nil {
		return nil, err
	}
	staged, err := gitcmd.Paths(in.Top, nil, nil, "diff-index", "--cached", "--name-only", "-z", "--no-renames", head)
	if err != nil {
		return nil, err
	}
	boxChanged, err := gitcmd.Paths(in.Top, nil, nil, "diff-tree", "-r", "--name-only", "-z", "--no-renames", head, in.BoxHead)
	if err != nil {
		return nil, err
	}
	byBox := map[string]bool{}
	for _, p := range boxChanged {
		byBox[p] = true
	}
	entries, err := gitcmd.Paths(in.Top, nil, nil, "ls-files", "-s", "-z")
	if err != nil {
		return nil, err
	}
	current := map[string]string{}
	for _, e := range entries {
		if _, path, ok := strings.Cut(e, "\t"); ok {
			current[path] += e + "\x00"
		}
	}
	var info bytes.Buffer
	for _, p := range staged {
		switch {
		case byBox[p]:
		case current[p] != "":
			info.WriteString(current[p])
		default:
			fmt.Fprintf(&info, "0 %s\t%s\x00", strings.Repeat("0", 40), p)
		}
	}
	if info.Len() > 0 {
		if _, err := gitcmd.Run(in.Top, env, &info, "update-index", "-z", "--index-info"); err != nil {
			return nil, err
		}
	}
	// A sparse checkout's skip-worktree bits stay on the paths that had
	// them: read-tree into a fresh index has none, and git would see every
	// path outside the cone as deleted.
	if skip := skipWorktree(in.Top, ""); len(skip) > 0 {
		var paths bytes.Buffer
		for p := range skip {
			paths.WriteString(p + "\x00")
		}
		if _, err := gitcmd.Run(in.Top, env, &paths, "update-index", "-z", "--skip-worktree", "--stdin"); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(tmp.Name())
}

// changedSinceHead is every path the user changed since HEAD: staged,
// unstaged or untracked (not ignored).
func changedSinceHead(top string) (map[string]bool, error) {
	// Raw: the first entry's status may start with a space.
	out, err := gitcmd.Raw(top, nil, nil, "-c", "core.fsmonitor=false", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return nil, err
	}
	paths := map[string]bool{}
	for _, e := range strings.Split(string(out), "\x00") {
		if len(e) > 3 {
			paths[e[3:]] = true
		}
	}
	return paths, nil
}

// skipWorktree is the paths of the index (index, or the repository's
// when empty) with the skip-worktree bit: a sparse checkout's paths
// outside its cone.
func skipWorktree(top, index string) map[string]bool {
	var env []string
	if index != "" {
		env = []string{"GIT_INDEX_FILE=" + index}
	}
	out, _ := gitcmd.Raw(top, env, nil, "ls-files", "-z", "-t")
	skip := map[string]bool{}
	for _, e := range strings.Split(string(out), "\x00") {
		if p, ok := strings.CutPrefix(e, "S "); ok {
			skip[p] = true
		}
	}
	return skip
}

func isAncestor(top, a, b string) bool {
	_, err := gitcmd.Run(top, nil, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

func lockHeld(path string) error {
	return &Refusal{Msg: fmt.Sprintf("%s is held (a git command is running, or one that crashed left it: remove it when no git runs); nothing changed", path)}
}

func fileExists(path string) bool { _, err := os.Lstat(path); return err == nil }

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
