package packer

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Issue 39, Deliver 5: an agent that ran git stash and never popped made
// back take the user's uncommitted files out of the work tree without a
// word (they were only in refs/cocoonbox/base/<id>); and on a detached
// HEAD the box's commits came back as uncommitted changes, back not
// saying where the commits were. back's fetch now brings the box's stash,
// and its warnings name the stash and the files, and the commits.
func TestBackWarnsOfAStashedUsersWorkAndADetachedHeadsCommits(t *testing.T) {
	for _, c := range []struct {
		name           string
		detach, stash  bool
		want, wantNone string
	}{
		{name: "stash", stash: true, want: "left a stash holding files you had uncommitted (a.txt, u.txt): it is refs/cocoonbox/stash/x", wantNone: "HEAD is detached"},
		{name: "detached", detach: true, want: "HEAD is detached here, so the box's commits came back as uncommitted changes; the commits are ", wantNone: "stash"},
		{name: "neither", wantNone: "e"},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			git(t, top, "init", "-q")
			write(t, top, "a.txt", "one\n")
			git(t, top, "add", ".")
			git(t, top, "commit", "-q", "-m", "one")
			write(t, top, "old.txt", "the user's own stash\n")
			git(t, top, "stash", "-q", "-u") // the repository's own stash: no warning
			if c.detach {
				git(t, top, "checkout", "-q", "--detach")
			}
			write(t, top, "a.txt", "the user's uncommitted change\n")
			write(t, top, "u.txt", "the user's untracked file\n")
			repo, _ := FindRepo(top)
			p := testPacker(t)
			p.Dirs.Ensure(repo.Key)
			excludes, err := p.writeExcludes(repo, verbResult{resp: map[string]any{}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := gitcmd.Snapshot(top, "S", false)
			if err != nil {
				t.Fatal(err)
			}
			copyDir := boxCopy(t, repo, excludes)
			if c.stash {
				git(t, copyDir, "stash", "-q", "-u")
			}
			write(t, copyDir, "work.txt", "the agent's\n")
			git(t, copyDir, "add", "work.txt")
			git(t, copyDir, "commit", "-q", "-m", "agent")
			sp, err := gitcmd.Snapshot(copyDir, "S′", true)
			if err != nil {
				t.Fatal(err)
			}
			git(t, copyDir, "update-ref", "refs/cocoonbox/back/x", sp)
			git(t, top, append([]string{"fetch", "-q", copyDir}, fetchRefspecs("x")...)...)
			ws := strings.Join(backWarnings(top, "x", s, sp), "\n")
			if !strings.Contains(ws, c.want) || c.wantNone != "" && strings.Contains(ws, c.wantNone) {
				t.Errorf("back's warnings:\n%s\nwant %q and no %q", ws, c.want, c.wantNone)
			}
			if c.detach {
				if agent := git(t, copyDir, "rev-parse", "HEAD"); !strings.Contains(ws, agent[:12]) {
					t.Errorf("the warning does not name the box's commit %s:\n%s", agent, ws)
				}
			}
		})
	}
}
