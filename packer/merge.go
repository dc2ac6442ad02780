package packer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

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
	res := &MergeResult{PreBack: "refs/cocoonbox/pre-back/" + in.ID, Applied: []string{}}
	if lock, _ := gitcmd.GitPath(in.Top, "index.lock"); fileExists(lock) {
		return nil, lockHeld(lock)
	}
	if _, err := g("update-ref", "-m", "cocoonbox back "+in.ID, res.PreBack, head); err != nil {
		return nil, err
	}
	canMove := branch != "" && in.BoxHead != "" && head == sParent && isAncestor(in.Top, head, in.BoxHead)

	tree, err := gitcmd.SnapshotTree(in.Top)
	if err != nil {
		return nil, err
	}
	if head == sParent && tree == sTree {
		res.Case = CaseFastForward
		return res, apply(in, res, sTree, spTree, head, branch, canMove)
	}
	merged, conflict, err := mergeTree(in, head)
	if err != nil {
		return nil, err
	}
	if conflict != "" {
		return branchCase(in, res, conflict)
	}
	headTree, _ := g("rev-parse", "HEAD^{tree}")
	changes, err := g("diff", "--name-only", "-z", "--no-renames", headTree, merged)
	if err != nil {
		return nil, err
	}
	userChanged, err := changedSinceHead(in.Top)
	if err != nil {
		return nil, err
	}
	var touched []string
	for _, p := range splitZ(changes) {
		if userChanged[p] {
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
// holding index.lock all along; with move, the lock holds the new index
// and the branch moves to the box HEAD before the lock becomes the index.
func apply(in MergeInput, res *MergeResult, from, to, head, branch string, move bool) error {
	lockPath, err := gitcmd.GitPath(in.Top, "index.lock")
	if err != nil {
		return err
	}
	indexPath, err := gitcmd.GitPath(in.Top, "index")
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
	committed := false
	defer func() {
		if !committed {
			lock.Close()
			os.Remove(lockPath)
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
	names, err := gitcmd.Run(in.Top, nil, nil, "diff", "--name-only", "-z", "--no-renames", from, to)
	if err != nil {
		return err
	}
	patch, err := gitcmd.Raw(in.Top, nil, nil, "diff", "--binary", "--full-index", "--no-renames", "--no-ext-diff", "--no-textconv", from, to)
	if err != nil {
		return err
	}
	if len(patch) > 0 {
		if _, err := gitcmd.Run(in.Top, nil, bytes.NewReader(patch), "apply", "--whitespace=nowarn", "-"); err != nil {
			return &Refusal{Msg: fmt.Sprintf("the box's change does not apply to your work tree (%v); nothing changed; the box's state is at refs/cocoonbox/back/%s", err, in.ID)}
		}
		res.Applied = splitZ(names)
	}
	if move {
		if _, err := gitcmd.Run(in.Top, nil, nil, "update-ref", "-m", "cocoonbox back "+in.ID, branch, in.BoxHead, head); err != nil {
			if len(patch) > 0 {
				gitcmd.Run(in.Top, nil, bytes.NewReader(patch), "apply", "-R", "--whitespace=nowarn", "-")
			}
			return fmt.Errorf("move %s to the box HEAD (the work tree is put back): %w", branch, err)
		}
		res.MovedTo = in.BoxHead
	}
	if err := lock.Close(); err != nil {
		return err
	}
	if err := os.Rename(lockPath, indexPath); err != nil {
		return fmt.Errorf("put the new index in place: %w", err)
	}
	committed = true
	return nil
}

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
	staged, err := gitcmd.Run(in.Top, nil, nil, "diff-index", "--cached", "--name-only", "-z", "--no-renames", head)
	if err != nil {
		return nil, err
	}
	boxChanged, err := gitcmd.Run(in.Top, nil, nil, "diff-tree", "-r", "--name-only", "-z", "--no-renames", head, in.BoxHead)
	if err != nil {
		return nil, err
	}
	byBox := map[string]bool{}
	for _, p := range splitZ(boxChanged) {
		byBox[p] = true
	}
	entries, err := gitcmd.Run(in.Top, nil, nil, "ls-files", "-s", "-z")
	if err != nil {
		return nil, err
	}
	current := map[string]string{}
	for _, e := range splitZ(entries) {
		if _, path, ok := strings.Cut(e, "\t"); ok {
			current[path] += e + "\x00"
		}
	}
	var info bytes.Buffer
	for _, p := range splitZ(staged) {
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

func isAncestor(top, a, b string) bool {
	_, err := gitcmd.Run(top, nil, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

func lockHeld(path string) error {
	return &Refusal{Msg: fmt.Sprintf("%s is held (a git command is running, or one that crashed left it: remove it when no git runs); nothing changed", path)}
}

func fileExists(path string) bool { _, err := os.Lstat(path); return err == nil }

func splitZ(s string) []string {
	var out []string
	for _, p := range strings.Split(s, "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
