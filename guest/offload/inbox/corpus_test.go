package inbox_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest/repocorpus"
)

// The corpus of repository shapes (issue 22, Deliver 2) on the box side:
// each is offloaded by the Mac side of these tests (the contract's rsync
// and bundle, the stream) into the real verbs, inbox, tmux and the
// stand-in CLI; send takes it and the CLI its first prompt; in the copy,
// HEAD, the status, the staged diff and every ref under refs/heads and
// refs/remotes equal the host's (a symref, origin/HEAD, stays one but in
// a linked worktree's copy), git fsck finds nothing missing (the
// partially staged file's blob: the box's index names it), and git stash
// and git stash pop --index work (the first prompt suggests them).
func TestCorpusOnTheBoxSide(t *testing.T) {
	for i, shape := range repocorpus.Shapes() {
		if shape.Outcome != repocorpus.Back {
			continue // the host refuses it before begin: the box never sees it
		}
		t.Run(shape.Name, func(t *testing.T) {
			e := newEnv(t)
			top := shape.Make(t)
			key, name := fmt.Sprintf("corpus%d", i), "c-"+shape.Name
			send, code := e.macSide(top, key, name, "claude", "off1")
			if code != 0 || send["accepted"] != true {
				t.Fatalf("%s (%s): send %d %v", shape.Name, shape.About, code, send)
			}
			copyDir := e.paths.Copy(name)
			for _, args := range offloadtest.CopyChecks(shape.Name == "linked-worktree") {
				if got, want := repocorpus.Git(t, copyDir, args...), repocorpus.Git(t, top, args...); got != want {
					t.Errorf("git %s in the copy:\n%.600q\nwant the host's:\n%.600q", strings.Join(args, " "), got, want)
				}
			}
			if out, err := exec.Command("git", "-C", copyDir, "fsck", "--no-dangling", "--no-progress").CombinedOutput(); err != nil {
				t.Errorf("git fsck in the copy: %v: %s", err, out)
			}
			before := repocorpus.Git(t, copyDir, "status", "--porcelain", "-z", "--untracked-files=all")
			repocorpus.Git(t, copyDir, "stash", "-q", "-u")
			repocorpus.Git(t, copyDir, "stash", "pop", "-q", "--index")
			if after := repocorpus.Git(t, copyDir, "status", "--porcelain", "-z", "--untracked-files=all"); after != before {
				t.Errorf("git stash and pop --index in the copy changed its status:\n%.600q\nwas\n%.600q", after, before)
			}
		})
	}
}
