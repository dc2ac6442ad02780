package packer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// The helpers the offload tests share (guest/offload/offloadtest).
var (
	git   = offloadtest.Git
	write = offloadtest.Write
	read  = offloadtest.Read
)

// scene is a host repository offloaded at S into a box copy (a clone
// set to S's state, as send leaves it: HEAD at S's parent, the work tree
// S's), where a test plays the box CLI's part.
type scene struct {
	t         *testing.T
	host, box string
	id, s     string
}

// newScene is the scene; prep runs in the host repository before S is
// taken (after the first commit and a.txt's uncommitted change).
func newScene(t *testing.T, prep ...func(host string)) *scene {
	s := &scene{t: t, host: t.TempDir(), box: t.TempDir(), id: "off-test"}
	git(t, s.host, "init", "-q")
	write(t, s.host, ".gitignore", "*.log\n")
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "d/f.txt"} {
		write(t, s.host, f, f+" one\n")
	}
	git(t, s.host, "add", ".")
	git(t, s.host, "commit", "-q", "-m", "one")
	write(t, s.host, "a.txt", "a.txt uncommitted before the offload\n")
	for _, f := range prep {
		f(s.host)
	}
	var err error
	if s.s, err = gitcmd.Snapshot(s.host, "S", false); err != nil {
		t.Fatal(err)
	}
	git(t, s.host, "update-ref", "refs/cocoonbox/base/"+s.id, s.s)
	git(t, s.box, "clone", "-q", s.host, ".")
	git(t, s.box, "checkout", "-q", s.s, "--", ".")
	git(t, s.box, "reset", "-q")
	return s
}

// back makes S′ in the box as post --back does, fetches as back does
// and merges.
func (s *scene) back() (*MergeResult, error) {
	s.postBack()
	return s.merge()
}

// postBack makes S′ in the box as post --back does.
func (s *scene) postBack() {
	sp, err := gitcmd.Snapshot(s.box, "S′", true)
	if err != nil {
		s.t.Fatal(err)
	}
	git(s.t, s.box, "update-ref", "refs/cocoonbox/back/"+s.id, sp)
}

// merge fetches as back does and merges.
func (s *scene) merge() (*MergeResult, error) {
	git(s.t, s.host, "fetch", "-q", s.box, "+refs/heads/*:refs/cocoonbox/box/*", "+refs/cocoonbox/back/"+s.id+":refs/cocoonbox/back/"+s.id)
	return Merge(s.input())
}

// input is the merge's input as back makes it after the fetch.
func (s *scene) input() MergeInput {
	return MergeInput{Top: s.host, ID: s.id, S: s.s, SPrime: git(s.t, s.host, "rev-parse", "refs/cocoonbox/back/"+s.id),
		BoxHead: git(s.t, s.host, "rev-parse", "refs/cocoonbox/box/main"), Now: time.Date(2026, 12, 1, 13, 4, 5, 0, time.UTC)}
}

// state is everything of the host repository a merge must not touch
// unless it says so: HEAD, the index, the status with ignored files, the
// staged and unstaged diffs and every file's bytes.
func (s *scene) state() string {
	t := s.t
	var b strings.Builder
	b.WriteString(git(t, s.host, "rev-parse", "HEAD") + "\n")
	b.WriteString(git(t, s.host, "ls-files", "-s") + "\n")
	b.WriteString(git(t, s.host, "status", "--porcelain", "--untracked-files=all", "--ignored") + "\n")
	b.WriteString(git(t, s.host, "diff", "--cached") + "\n" + git(t, s.host, "diff") + "\n")
	filepath.WalkDir(s.host, func(p string, d os.DirEntry, err error) error {
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			data, _ := os.ReadFile(p)
			b.WriteString(p + "=" + string(data) + "\n")
		}
		return nil
	})
	return b.String()
}

// Contract: Offload, Back, Mac side, step 4, fast-forward: the local
// repo still equals S, so the work tree moves from S to S′ and the
// branch to the box's HEAD, the box's commits staying commits; what the
// box left uncommitted stays uncommitted.
func TestBackFastForward(t *testing.T) {
	s := newScene(t)
	oldHead := git(t, s.host, "rev-parse", "HEAD")
	write(t, s.box, "b.txt", "b.txt by the box, committed\n")
	git(t, s.box, "commit", "-q", "-m", "box: b", "b.txt")
	write(t, s.box, "c.txt", "c.txt by the box, uncommitted\n")
	m, err := s.back()
	if err != nil {
		t.Fatal(err)
	}
	if m.Case != CaseFastForward {
		t.Fatalf("case %q (%s), want fast-forward", m.Case, m.Reason)
	}
	boxHead := git(t, s.box, "rev-parse", "HEAD")
	if got := git(t, s.host, "rev-parse", "HEAD"); got != boxHead || m.MovedTo != boxHead {
		t.Errorf("HEAD %s, want the box's HEAD %s", got, boxHead)
	}
	if got := git(t, s.host, "log", "-1", "--format=%s"); got != "box: b" {
		t.Errorf("the box's commit is not a commit here: %q", got)
	}
	for f, want := range map[string]string{"a.txt": "a.txt uncommitted before the offload\n", "b.txt": "b.txt by the box, committed\n", "c.txt": "c.txt by the box, uncommitted\n"} {
		if got := read(t, s.host, f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if st := git(t, s.host, "status", "--porcelain"); !strings.Contains(st, "M a.txt") || !strings.Contains(st, "M c.txt") || strings.Contains(st, "b.txt") {
		t.Errorf("status after the fast-forward:\n%s\nwant a.txt and c.txt modified, uncommitted", st)
	}
	if got := git(t, s.host, "rev-parse", m.PreBack); got != oldHead {
		t.Errorf("%s = %s, want the old HEAD %s", m.PreBack, got, oldHead)
	}
	if fileExists(filepath.Join(s.host, ".git/index.lock")) {
		t.Error("index.lock left behind")
	}
}

// Contract: Offload, Back, Mac side, clean merge: the user committed and
// changed other files meanwhile; the box's change is applied uncommitted
// and the user's staged, unstaged and untracked work is byte-identical.
func TestBackCleanMergeKeepsLocalWork(t *testing.T) {
	s := newScene(t)
	write(t, s.host, "d/f.txt", "d by the user, committed after S\n")
	git(t, s.host, "commit", "-q", "-am", "user: d and a")
	write(t, s.host, "e.txt", "e staged by the user\n")
	git(t, s.host, "add", "e.txt")
	write(t, s.host, "c.txt", "c unstaged by the user\n")
	write(t, s.host, "u.txt", "u untracked by the user\n")
	staged, unstaged := git(t, s.host, "diff", "--cached"), git(t, s.host, "diff")
	userHead := git(t, s.host, "rev-parse", "HEAD")

	write(t, s.box, "b.txt", "b.txt by the box\n")
	git(t, s.box, "commit", "-q", "-m", "box: b", "b.txt")
	m, err := s.back()
	if err != nil {
		t.Fatal(err)
	}
	if m.Case != CaseMerge || strings.Join(m.Applied, ",") != "b.txt" {
		t.Fatalf("merge %+v, want a clean merge applying b.txt", m)
	}
	if got := read(t, s.host, "b.txt"); got != "b.txt by the box\n" {
		t.Errorf("b.txt = %q", got)
	}
	if got := git(t, s.host, "rev-parse", "HEAD"); got != userHead || m.MovedTo != "" {
		t.Errorf("HEAD moved to %s (the user committed since S: it stays %s)", got, userHead)
	}
	for f, want := range map[string]string{"e.txt": "e staged by the user\n", "c.txt": "c unstaged by the user\n", "u.txt": "u untracked by the user\n", "d/f.txt": "d by the user, committed after S\n"} {
		if got := read(t, s.host, f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if got := git(t, s.host, "diff", "--cached"); got != staged {
		t.Errorf("the staged diff changed:\n%s\nwant\n%s", got, staged)
	}
	if got := git(t, s.host, "diff", "--", "c.txt"); got != unstaged[:len(got)] || !strings.Contains(git(t, s.host, "diff"), "b.txt by the box") {
		t.Errorf("unstaged: %s", git(t, s.host, "diff"))
	}
}

// Contract: Offload, Back, Mac side: a clean merge that would change a
// path the user changed since HEAD takes the branch path: the branch
// cocoonbox/back-<stamp> at S′, the tree untouched, pre-back naming HEAD.
func TestBackPathTheUserChangedTakesTheBranch(t *testing.T) {
	s := newScene(t)
	git(t, s.host, "commit", "-q", "-am", "user: a")
	write(t, s.host, "b.txt", "b.txt one\nb unstaged by the user, at the end\n")
	write(t, s.box, "b.txt", "b.txt by the box at the start\nb.txt one\n")
	s.assertBranch(t, "which you changed since HEAD")
}

// Contract: Offload, Back, Mac side: a conflict takes the branch path.
func TestBackConflictTakesTheBranch(t *testing.T) {
	s := newScene(t)
	write(t, s.host, "b.txt", "b by the user\n")
	git(t, s.host, "commit", "-q", "-am", "user: b")
	write(t, s.box, "b.txt", "b by the box\n")
	git(t, s.box, "commit", "-q", "-m", "box: b", "b.txt")
	s.assertBranch(t, "conflicts in b.txt")
}

// Contract: Offload, Back, Mac side: git merge-tree's exit status 1 is a
// conflict even where git places the file itself and the merged tree
// looks whole (a directory renamed here, a file added in it in the box:
// "CONFLICT (file location)"), never "clean".
func TestBackMergeTreeStatusOneIsAConflict(t *testing.T) {
	s := newScene(t)
	git(t, s.host, "add", "a.txt")
	git(t, s.host, "mv", "d", "moved")
	git(t, s.host, "commit", "-q", "-m", "user: d renamed")
	write(t, s.box, "d/new.txt", "new in the box\n")
	git(t, s.box, "add", "d/new.txt")
	git(t, s.box, "commit", "-q", "-m", "box: d/new.txt")
	s.assertBranch(t, "the merge conflicts")
}

func (s *scene) assertBranch(t *testing.T, reason string) {
	t.Helper()
	before, head := s.state(), git(t, s.host, "rev-parse", "HEAD")
	m, err := s.back()
	if err != nil {
		t.Fatal(err)
	}
	if m.Case != CaseBranch || !strings.Contains(m.Reason, reason) {
		t.Fatalf("merge %+v, want the branch case because %q", m, reason)
	}
	if m.Branch != "cocoonbox/back-20261201T130405Z" {
		t.Errorf("branch %q", m.Branch)
	}
	if got, want := git(t, s.host, "rev-parse", "refs/heads/"+m.Branch), git(t, s.host, "rev-parse", "refs/cocoonbox/back/"+s.id); got != want {
		t.Errorf("the branch is at %s, S′ is %s", got, want)
	}
	if got := git(t, s.host, "rev-parse", m.PreBack); got != head {
		t.Errorf("pre-back %s, HEAD was %s", got, head)
	}
	if after := s.state(); after != before {
		t.Errorf("the tree changed:\n%s\nwas\n%s", after, before)
	}
}

// Contract: Offload, Back, Mac side, moving the branch: a held
// index.lock, or a patch that does not apply, changes nothing, and the
// message says why.
func TestBackHeldLockOrUnappliablePatchChangesNothing(t *testing.T) {
	t.Run("index.lock held", func(t *testing.T) {
		s := newScene(t)
		write(t, s.box, "b.txt", "b by the box\n")
		git(t, s.box, "commit", "-q", "-m", "box: b", "b.txt")
		write(t, s.host, ".git/index.lock", "another git\n")
		before := s.state()
		_, err := s.back()
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Msg, "index.lock is held") || !strings.Contains(r.Msg, "nothing changed") {
			t.Fatalf("back with a held index.lock: %v", err)
		}
		if after := s.state(); after != before || read(t, s.host, ".git/index.lock") != "another git\n" {
			t.Errorf("changed:\n%s\nwas\n%s", after, before)
		}
	})
	t.Run("patch does not apply", func(t *testing.T) {
		s := newScene(t)
		write(t, s.host, "build.log", "the user's ignored log\n")
		write(t, s.box, "build.log", "the box's log, force-added\n")
		git(t, s.box, "add", "-f", "build.log")
		git(t, s.box, "commit", "-q", "-m", "box: the log")
		before := s.state()
		_, err := s.back()
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Msg, "does not apply") || !strings.Contains(r.Msg, "build.log") {
			t.Fatalf("back with a patch that does not apply: %v", err)
		}
		if after := s.state(); after != before {
			t.Errorf("changed:\n%s\nwas\n%s", after, before)
		}
		if fileExists(filepath.Join(s.host, ".git/index.lock")) {
			t.Error("index.lock left behind")
		}
	})
}
