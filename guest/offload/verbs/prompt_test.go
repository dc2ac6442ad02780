package verbs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Issue 39, Deliver 5: the first prompt suggested `git stash` to compare
// against S; an agent that stashed and never popped took the user's
// uncommitted files out of the copy, and back then removed them from the
// user's work tree without a word. The prompt now gives a worktree at S
// and warns off stash; its command, run as written in a copy with
// uncommitted work, checks out S beside the copy and leaves the copy's
// status as it was.
func TestTheFirstPromptComparesAgainstSWithoutStashing(t *testing.T) {
	base := BaseRef("off-1")
	p := Preamble("repo", "/h/handover.md", base)
	if strings.Contains(p, "`git stash`") {
		t.Errorf("the preamble still suggests git stash:\n%s", p)
	}
	m := regexp.MustCompile("`(git worktree add [^`]+)`").FindStringSubmatch(p)
	if m == nil {
		t.Fatalf("no worktree at S in the preamble:\n%s", p)
	}
	copyDir := t.TempDir()
	run := func(dir, line string) string {
		t.Helper()
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
		return string(out)
	}
	run(copyDir, "git init -q && echo one >a.txt && git add a.txt && git commit -qm one && git update-ref "+base+" HEAD && echo uncommitted >a.txt && echo new >u.txt")
	before := run(copyDir, "git status --porcelain")
	tmp := t.TempDir()
	line := strings.ReplaceAll(m[1], "/tmp/", tmp+"/")
	run(copyDir, line)
	if after := run(copyDir, "git status --porcelain"); after != before {
		t.Errorf("the copy's status after %q: %q, was %q", m[1], after, before)
	}
	wt, _ := filepath.Glob(filepath.Join(tmp, "*", "a.txt"))
	if len(wt) != 1 {
		t.Fatalf("%q made no checkout of S under %s", line, tmp)
	}
	if got, _ := os.ReadFile(wt[0]); string(got) != "one\n" {
		t.Errorf("the worktree's a.txt is %q, want S's", got)
	}
}
