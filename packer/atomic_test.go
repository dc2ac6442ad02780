package packer

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// childEnv makes the test binary a child that runs one Merge (TestMain),
// so a test can SIGKILL a real back at a step.
const childEnv = "COCOONBOX_PACKER_MERGE_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		var c struct {
			In     MergeInput
			KillAt string
		}
		if err := json.Unmarshal([]byte(spec), &c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		stepHook = func(step string) error {
			if step == c.KillAt {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return nil
		}
		if _, err := Merge(c.In); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// exact is the host repository byte for byte as Deliver 3 names it: HEAD
// (symbolic and its commit), every ref outside refs/cocoonbox/, the index
// file's bytes and every entry of the work tree with its type, mode and
// content, ignored ones too. It runs git with GIT_OPTIONAL_LOCKS=0, so
// reading never refreshes the index.
func exact(t *testing.T, top string) string {
	t.Helper()
	var b strings.Builder
	idx, err := os.ReadFile(filepath.Join(top, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "index %x\n", sha256.Sum256(idx))
	for _, args := range [][]string{{"symbolic-ref", "-q", "HEAD"}, {"rev-parse", "HEAD"}, {"for-each-ref", "--format=%(refname) %(objectname)"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = top, append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
		out, _ := cmd.Output()
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(l, "refs/cocoonbox/") {
				b.WriteString(l + "\n")
			}
		}
	}
	filepath.WalkDir(top, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return werr
		}
		rel, _ := filepath.Rel(top, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		if err != nil { // a path the walk could not read is part of the snapshot, not a silent gap
			fmt.Fprintf(&b, "%q unreadable: %v\n", rel, err)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%q %v", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %q", l)
		case info.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString("\n")
		return nil
	})
	if fileExists(filepath.Join(top, ".git/index.lock")) {
		b.WriteString("index.lock held\n")
	}
	return b.String()
}

// moving is a scene whose back is a fast-forward that moves the branch
// and turns the tracked directory d/ into a file d, with the user's
// uncommitted d/f.txt in S, several files changed and removed.
func moving(t *testing.T, prep ...func(host string)) *scene {
	s := newScene(t, append([]func(string){func(host string) {
		write(t, host, "d/f.txt", "d/f.txt uncommitted, only here and in S\n")
	}}, prep...)...)
	git(t, s.box, "rm", "-q", "-r", "-f", "d")
	write(t, s.box, "d", "d is a file now\n")
	write(t, s.box, "b.txt", "b.txt by the box\n")
	git(t, s.box, "rm", "-q", "c.txt")
	write(t, s.box, "new/deep/n.txt", "new in the box\n")
	git(t, s.box, "add", "-A")
	git(t, s.box, "commit", "-q", "-m", "box: d is a file")
	write(t, s.box, "e.txt", "e by the box, uncommitted\n")
	return s
}

// Issue 22: a failed apply deleted the user's uncommitted d/f.txt and
// said "nothing changed". The box made d/ a file d; the user has an
// ignored d/build.log there: back refuses naming it, and the repository
// is byte for byte as it was.
func TestBackDirectoryTheBoxMadeAFileKeepsUncommittedWork(t *testing.T) {
	s := moving(t, func(host string) { write(t, host, "d/build.log", "the user's ignored log\n") })
	before := exact(t, s.host)
	_, err := s.back()
	var r *Refusal
	if !errors.As(err, &r) || !strings.Contains(r.Msg, "d/build.log is in the way") {
		t.Fatalf("back: %v, want a refusal naming d/build.log", err)
	}
	if after := exact(t, s.host); after != before {
		t.Errorf("a refused back changed the repository:\n%s\nwas\n%s", after, before)
	}
	if got := read(t, s.host, "d/f.txt"); got != "d/f.txt uncommitted, only here and in S\n" {
		t.Errorf("d/f.txt = %q", got)
	}
	// Once the log is moved away, the same back goes through.
	os.Remove(filepath.Join(s.host, "d/build.log"))
	m, err := s.merge()
	if err != nil || m.Case != CaseFastForward || m.MovedTo == "" {
		t.Fatalf("back after the log moved: %v %+v", err, m)
	}
	if got := read(t, s.host, "d"); got != "d is a file now\n" {
		t.Errorf("d = %q", got)
	}
}

// The steps of back's merge a failure or a kill is injected at.
var mergeSteps = []string{"pre-back", "merge-tree", "apply", "branch-move", "index-swap"}

// Issue 22, Deliver 3: back is all or nothing. A failure injected at each
// step of the merge leaves the work tree, the index, HEAD and every ref
// outside refs/cocoonbox/ byte for byte as before; the next back
// succeeds. (merge-tree runs on the clean-merge path: the user commits
// meanwhile there.)
func TestBackFailureAtEachStepChangesNothing(t *testing.T) {
	for _, step := range mergeSteps {
		t.Run(step, func(t *testing.T) {
			s := moving(t)
			if step == "merge-tree" {
				s.userCommits()
			}
			s.postBack()
			before := exact(t, s.host)
			stepHook = func(at string) error {
				if at == step {
					return fmt.Errorf("injected at %s", at)
				}
				return nil
			}
			_, err := s.merge()
			stepHook = nil
			if err == nil || !strings.Contains(err.Error(), "injected at "+step) {
				t.Fatalf("back with a failure at %s: %v", step, err)
			}
			var u *Undone
			if (step == "apply" || step == "branch-move" || step == "index-swap") && !errors.As(err, &u) {
				t.Errorf("the failure does not say it was undone: %v", err)
			}
			if after := exact(t, s.host); after != before {
				t.Errorf("a failure at %s changed the repository:\n%s\nwas\n%s", step, after, before)
			}
			m, err := s.merge()
			if err != nil {
				t.Fatalf("the next back: %v", err)
			}
			s.assertDone(t, step, m)
		})
	}
}

// Issue 22, Deliver 3: a back SIGKILLed at each step of the merge (a real
// process, the test binary as a child) leaves a state the next back
// undoes byte for byte before it merges again, or, killed past its
// commit point, finishes.
func TestBackKilledAtEachStep(t *testing.T) {
	for _, step := range append(mergeSteps, "after-commit") {
		t.Run(step, func(t *testing.T) {
			s := moving(t)
			if step == "merge-tree" {
				s.userCommits()
			}
			s.postBack()
			git(t, s.host, "fetch", "-q", s.box, "+refs/heads/*:refs/cocoonbox/box/*", "+refs/cocoonbox/back/"+s.id+":refs/cocoonbox/back/"+s.id)
			before := exact(t, s.host)
			in := s.input()
			s.killAt(t, in, step)
			done, err := RecoverBack(s.host, s.id)
			if err != nil {
				t.Fatalf("the next back's recovery: %v", err)
			}
			if step == "after-commit" {
				if done == nil || done.Case != CaseFastForward {
					t.Fatalf("killed past the commit point, the recovery did not finish it: %+v", done)
				}
				if got := read(t, s.host, "d"); got != "d is a file now\n" || fileExists(filepath.Join(s.host, ".git/index.lock")) {
					t.Errorf("the finished back: d = %q, index.lock held %v", got, fileExists(filepath.Join(s.host, ".git/index.lock")))
				}
				return
			}
			if done != nil {
				t.Fatalf("killed at %s, the recovery says done: %+v", step, done)
			}
			if after := exact(t, s.host); after != before {
				t.Errorf("killed at %s, the recovered repository differs:\n%s\nwas\n%s", step, after, before)
			}
			m, err := Merge(in)
			if err != nil {
				t.Fatalf("the back after the kill at %s: %v", step, err)
			}
			s.assertDone(t, step, m)
		})
	}
}

// userCommits commits z.txt in the host after S, so back merges (and,
// the user's uncommitted d/f.txt being in the way, takes the branch).
func (s *scene) userCommits() {
	write(s.t, s.host, "z.txt", "the user's, committed after S\n")
	git(s.t, s.host, "add", "z.txt")
	git(s.t, s.host, "commit", "-q", "-m", "user: z")
}

// assertDone checks the back that followed a failure or a kill at step:
// the branch for the merge-tree scene, else the fast-forward with d a
// file.
func (s *scene) assertDone(t *testing.T, step string, m *MergeResult) {
	t.Helper()
	if step == "merge-tree" {
		if m.Case != CaseBranch {
			t.Errorf("the back after %s: %+v, want the branch", step, m)
		}
		return
	}
	if m.Case != CaseFastForward || m.MovedTo == "" {
		t.Errorf("the back after %s: %+v, want the fast-forward moving the branch", step, m)
	}
	if got := read(t, s.host, "d"); got != "d is a file now\n" {
		t.Errorf("after the back d = %q", got)
	}
	if st := git(t, s.host, "status", "--porcelain", "--untracked-files=all"); st != "?? e.txt" {
		t.Errorf("status after the back:\n%s\nwant e.txt alone (the box's, uncommitted): the box's commit a commit", st)
	}
}

// killAt runs the merge of s in a child process and SIGKILLs it at step.
func (s *scene) killAt(t *testing.T, in MergeInput, step string) {
	t.Helper()
	spec, _ := json.Marshal(map[string]any{"In": in, "KillAt": step})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed at %s: %v %s", step, err, out)
	}
}

// A killed back's index.lock that another git replaced meanwhile (the
// user removed it and ran git) is that git's: the next back undoes its
// own renames and never touches the lock.
func TestBackRecoveryLeavesAnotherGitsLock(t *testing.T) {
	s := moving(t)
	s.postBack()
	git(t, s.host, "fetch", "-q", s.box, "+refs/heads/*:refs/cocoonbox/box/*", "+refs/cocoonbox/back/"+s.id+":refs/cocoonbox/back/"+s.id)
	before := exact(t, s.host)
	s.killAt(t, s.input(), "apply")
	write(t, s.host, ".git/index.lock", "another git\n")
	if _, err := RecoverBack(s.host, s.id); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s.host, ".git/index.lock"); got != "another git\n" {
		t.Errorf("the other git's index.lock is %q", got)
	}
	if after := exact(t, s.host); after != before+"index.lock held\n" {
		t.Errorf("the recovered repository differs:\n%s\nwas\n%s", after, before)
	}
}

// Issue 22: the agent committed after post --back. Back moved HEAD to
// that newer commit and wrote the older S′ into the tree, so the commit
// showed as reverted. The branch moves to the commit S′ was made on; the
// later commit is named, not brought.
func TestBackAfterTheAgentCommittedPastItsBack(t *testing.T) {
	s := newScene(t)
	write(t, s.box, "b.txt", "b by the box\n")
	git(t, s.box, "commit", "-q", "-am", "box: b")
	atBack := git(t, s.box, "rev-parse", "HEAD")
	s.postBack()
	write(t, s.box, "late.txt", "committed after the back\n")
	git(t, s.box, "add", "late.txt")
	git(t, s.box, "commit", "-q", "-m", "box: after the back")
	m, err := s.merge()
	if err != nil {
		t.Fatal(err)
	}
	if m.MovedTo != atBack || m.Later != git(t, s.box, "rev-parse", "HEAD") {
		t.Errorf("moved to %s (later %s), want the commit S′ was made on %s", m.MovedTo, m.Later, atBack)
	}
	if st := git(t, s.host, "status", "--porcelain"); strings.Contains(st, "b.txt") || strings.Contains(st, "late.txt") {
		t.Errorf("the status shows the box's commits as changed:\n%s", st)
	}
}

// Issue 22: a sparse checkout lost its skip-worktree bits when the
// branch moved (read-tree into a fresh index), every path outside the
// cone then showing as deleted.
func TestBackSparseCheckoutKeepsSkipWorktree(t *testing.T) {
	s := newScene(t, func(host string) {
		git(t, host, "stash", "-q")
		write(t, host, "out/x.txt", "outside the cone\n")
		git(t, host, "add", "out/x.txt")
		git(t, host, "commit", "-q", "-m", "out")
		git(t, host, "sparse-checkout", "set", "--no-cone", "/*", "!/out/")
		git(t, host, "stash", "pop", "-q")
	})
	write(t, s.box, "b.txt", "b by the box\n")
	git(t, s.box, "commit", "-q", "-am", "box: b")
	m, err := s.back()
	if err != nil || m.MovedTo == "" {
		t.Fatalf("back: %v %+v", err, m)
	}
	if got := git(t, s.host, "ls-files", "-t", "out/x.txt"); got != "S out/x.txt" {
		t.Errorf("out/x.txt in the index: %q, want its skip-worktree bit", got)
	}
	if st := git(t, s.host, "status", "--porcelain"); strings.Contains(st, "out/") {
		t.Errorf("the status shows the sparse paths:\n%s", st)
	}
}

// Issue 22: a path starting with a space slipped past the "you changed
// this" check (the -z output was trimmed), so the user's uncommitted
// " n.txt" was rewritten. It takes the branch.
func TestBackLeadingSpacePathTheUserChangedTakesTheBranch(t *testing.T) {
	s := newScene(t, func(host string) {
		write(t, host, " n.txt", "committed\n")
		git(t, host, "add", " n.txt")
		git(t, host, "commit", "-q", "-m", "n")
	})
	git(t, s.host, "commit", "-q", "-am", "user: a")
	write(t, s.host, " n.txt", "committed\nthe user's, uncommitted\n")
	write(t, s.box, " n.txt", "the box's\ncommitted\n")
	s.assertBranch(t, "which you changed since HEAD")
}
