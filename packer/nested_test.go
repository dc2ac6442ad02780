package packer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Issue 39, Deliver 2: a linked worktree inside the work tree (git
// worktree add wt, not ignored) went to the box with its .git file, which
// names a directory of this machine's .git; the box's git saw a broken
// repository there, so the copy never equalled S and every offload of
// the main tree failed. It is left out of the copy and of S; the copy,
// checked as the box checks it with this machine's .git/worktrees out of
// reach as it is in the box, equals S; and back is the fast-forward, the
// worktree's uncommitted work untouched.
func TestALinkedWorktreeInsideTheWorkTreeIsLeftOut(t *testing.T) {
	top := t.TempDir()
	git(t, top, "init", "-q")
	write(t, top, "a.txt", "a\n")
	git(t, top, "add", ".")
	git(t, top, "commit", "-q", "-m", "one")
	git(t, top, "worktree", "add", "-q", "wt")
	git(t, top, "worktree", "add", "-q", "tools/[x] wt", "-b", "x")
	write(t, top, "wt/new.txt", "work in the linked worktree\n")
	write(t, top, "tools/b.txt", "untracked beside a nested worktree\n")
	repo, err := FindRepo(top)
	if err != nil {
		t.Fatal(err)
	}
	p := testPacker(t)
	p.Dirs.Ensure(repo.Key)
	leftOut, err := p.linkedWorktrees(repo)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(leftOut, "|"); got != "tools/[x] wt|wt" {
		t.Errorf("left out %q, want the two linked worktrees", got)
	}
	excludes, err := p.writeExcludes(repo, verbResult{resp: map[string]any{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gitcmd.Snapshot(top, "S", false, leftOut...)
	if err != nil {
		t.Fatal(err)
	}
	if ls := git(t, top, "ls-tree", "-r", "--name-only", s); strings.Contains(ls, "wt") || !strings.Contains(ls, "tools/b.txt") {
		t.Errorf("S's tree:\n%s\nwant tools/b.txt and no worktree", ls)
	}
	// Into a copy where an earlier offload put the worktrees.
	copyDir := t.TempDir()
	run(t, "rsync", "-a", "--exclude=/.git/", top+"/", copyDir+"/")
	boxCopyAt(t, copyDir, repo, excludes, leftOut...)
	for _, f := range []string{"wt", "tools/[x] wt"} {
		if _, err := os.Lstat(filepath.Join(copyDir, f)); err == nil {
			t.Errorf("the linked worktree %s was sent", f)
		}
	}
	// The box has no /<top>/.git/worktrees: the copy is checked without it.
	wts := filepath.Join(top, ".git", "worktrees")
	if err := os.Rename(wts, wts+".away"); err != nil {
		t.Fatal(err)
	}
	got, err := gitcmd.SnapshotTree(copyDir)
	os.Rename(wts+".away", wts)
	if want := git(t, top, "rev-parse", s+"^{tree}"); err != nil || got != want {
		t.Errorf("the copy's snapshot %s (%v) is not S's tree %s", got, err, want)
	}
	write(t, copyDir, "agent.txt", "the agent's\n")
	sp, err := gitcmd.Snapshot(copyDir, "S′", true)
	if err != nil {
		t.Fatal(err)
	}
	git(t, copyDir, "update-ref", "refs/cocoonbox/back/x", sp)
	git(t, top, "fetch", "-q", copyDir, "+refs/cocoonbox/back/x:refs/cocoonbox/back/x")
	m, err := Merge(MergeInput{Top: top, ID: "x", S: s, SPrime: sp, Now: time.Now(), Keep: leftOut})
	if err != nil || m.Case != CaseFastForward {
		t.Fatalf("back: %v %+v, want the fast-forward", err, m)
	}
	if read(t, top, "agent.txt") != "the agent's\n" || read(t, top, "wt/new.txt") != "work in the linked worktree\n" {
		t.Errorf("after back: agent.txt %q, wt/new.txt %q", read(t, top, "agent.txt"), read(t, top, "wt/new.txt"))
	}
}
