//go:build booted

package offload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

const dotenvSecret = "TOKEN=S3CR3T-host-packer-opted-in"

// One box for every case: each has its own repository and repo key, and
// each offload ends before the next, so the box's three-session limit is
// never reached.
func TestOffloadAndBack(t *testing.T) {
	r := newRig(t)

	// Contract: Offload, Back, Mac side, fast-forward: the work tree moves
	// from S to S′ and the box's commits stay commits. And Secrets: an
	// opted-in .env reaches the box's tmpfs and no log; a not opted-in one
	// is never sent.
	t.Run("FastForwardAndASecret", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, key := repo(t, p, "ff", "standin: commit")
		repos, _ := p.Dirs.LoadRepos()
		repos.Prefs(key).Secrets = []string{"file:.env"}
		if err := p.Dirs.SaveRepos(repos); err != nil {
			t.Fatal(err)
		}
		write(t, top, ".env", dotenvSecret+"\n")
		headBefore := git(t, top, "rev-parse", "HEAD")
		res := offloadRepo(t, p, top)
		if rec, _ := p.Dirs.LoadRecord(key); rec == nil || rec.ID != res.ID || rec.Base != res.Base {
			t.Fatalf("offload.json: %+v, want the offload %s in flight", rec, res.ID)
		}
		copyDir := "/workspace/" + res.Name
		if got := r.b.MustSh(t, "cat "+copyDir+"/a.txt"); got != "two, uncommitted\n" {
			t.Errorf("the box's a.txt = %q", got)
		}
		secretFile := "/run/cocoonbox-offload/secrets/" + key + "/file/.env"
		if got := r.b.MustSh(t, "cat "+secretFile); got != dotenvSecret+"\n" {
			t.Errorf("the opted-in .env on the tmpfs: %q", got)
		}
		if got := strings.TrimSpace(r.b.MustSh(t, "readlink "+copyDir+"/.env")); got != secretFile {
			t.Errorf("the copy's .env links to %q, want the tmpfs", got)
		}
		offloadbox.MustVerb(t, r.b, nil, "status", "--repo", key)
		back, err := p.Back(context.Background(), top, false)
		if err != nil {
			t.Fatalf("back: %v\nprogress:\n%s", err, r.progress)
		}
		if back.Merge.Case != packer.CaseFastForward {
			t.Fatalf("back: %+v, want a fast-forward", back.Merge)
		}
		if got := git(t, top, "log", "-1", "--format=%s"); got != "standin turn 1" {
			t.Errorf("HEAD is %q, want the box's commit", got)
		}
		if got := git(t, top, "rev-parse", "HEAD~1"); got != headBefore {
			t.Errorf("the box's commit's parent is %s, want the old HEAD %s", got, headBefore)
		}
		if got := read(t, top, "a.txt"); got != "two, uncommitted\n" || !strings.Contains(git(t, top, "status", "--porcelain"), "M a.txt") {
			t.Errorf("a.txt (uncommitted before, and in S): %q", got)
		}
		if got := git(t, top, "rev-parse", back.Merge.PreBack); got != headBefore {
			t.Errorf("pre-back names %s", got)
		}
		if rec, _ := p.Dirs.LoadRecord(key); rec != nil {
			t.Errorf("offload.json still there after end: %+v", rec)
		}
		if _, err := os.Stat(back.BackMD); err != nil {
			t.Errorf("back.md: %v", err)
		}
		if strings.Contains(r.progress.String(), "S3CR3T") {
			t.Error("the secret is in the progress")
		}
		if out, _ := r.b.Sh("journalctl -m --no-pager -o verbose | grep -c 'S3CR3[T]'"); strings.TrimSpace(out) != "0" {
			t.Errorf("the secret is in the box's journal (%s entries)", strings.TrimSpace(out))
		}
		if out, _ := r.b.Sh("ls /run/cocoonbox-offload/secrets/"); strings.TrimSpace(out) != "" {
			t.Errorf("end left secrets: %q", out)
		}
	})

	// Contract: Offload, Back, Mac side, clean merge: the user committed
	// and changed other files meanwhile; the box's change comes in
	// uncommitted and the user's staged, unstaged and untracked work is
	// byte-identical after.
	t.Run("CleanMergeKeepsLocalWork", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, _ := repo(t, p, "merge", "standin: commit")
		offloadRepo(t, p, top)
		write(t, top, "b.txt", "b committed by the user meanwhile\n")
		git(t, top, "commit", "-q", "-m", "user: b", "b.txt")
		write(t, top, "c.txt", "c staged by the user\n")
		git(t, top, "add", "c.txt")
		write(t, top, "d.txt", "d untracked\n")
		userHead, staged := git(t, top, "rev-parse", "HEAD"), git(t, top, "diff", "--cached")
		back, err := p.Back(context.Background(), top, false)
		if err != nil {
			t.Fatalf("back: %v", err)
		}
		if back.Merge.Case != packer.CaseMerge || !contains(back.Merge.Applied, "work.txt") {
			t.Fatalf("back: %+v, want a clean merge bringing work.txt", back.Merge)
		}
		if got := read(t, top, "work.txt"); got != "turn 1\n" {
			t.Errorf("work.txt = %q", got)
		}
		for f, want := range map[string]string{"a.txt": "two, uncommitted\n", "c.txt": "c staged by the user\n", "d.txt": "d untracked\n", "b.txt": "b committed by the user meanwhile\n"} {
			if got := read(t, top, f); got != want {
				t.Errorf("%s = %q, want %q", f, got, want)
			}
		}
		if got := git(t, top, "rev-parse", "HEAD"); got != userHead {
			t.Errorf("HEAD moved to %s", got)
		}
		if got := git(t, top, "diff", "--cached"); got != staged {
			t.Errorf("the staged diff changed: %s", got)
		}
	})

	// Contract: Offload, Back, Mac side: a change to a path the user
	// changed since HEAD takes the branch cocoonbox/back-<stamp> at S′ and
	// leaves the tree untouched.
	t.Run("PathTheUserChangedTakesTheBranch", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, _ := repo(t, p, "branch", "standin: commit")
		offloadRepo(t, p, top)
		write(t, top, "work.txt", "the user's own work.txt\n")
		before := state(t, top)
		back, err := p.Back(context.Background(), top, false)
		if err != nil {
			t.Fatalf("back: %v", err)
		}
		if back.Merge.Case != packer.CaseBranch || !strings.HasPrefix(back.Merge.Branch, "cocoonbox/back-") {
			t.Fatalf("back: %+v, want the branch", back.Merge)
		}
		if got, want := git(t, top, "rev-parse", back.Merge.Branch), back.SPrime; got != want {
			t.Errorf("%s at %s, want S′ %s", back.Merge.Branch, got, want)
		}
		if after := state(t, top); after != before {
			t.Errorf("the tree changed:\n%s\nwas\n%s", after, before)
		}
		if read(t, top, "work.txt") != "the user's own work.txt\n" {
			t.Error("the user's work.txt changed")
		}
	})

	// Contract: Offload, "Offload, Mac side": rsync has no
	// --delete-excluded, so the box's own ignored target/ and node_modules/
	// survive a second offload of the repository; the host's .env (not
	// opted in) is never sent; the second time the bundle carries only what
	// the box lacks.
	t.Run("SecondOffloadKeepsTheBoxsIgnoredFiles", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, _ := repo(t, p, "again")
		res := offloadRepo(t, p, top)
		copyDir := "/workspace/" + res.Name
		r.b.Must(t, "runuser", "-u", "user", "--", "sh", "-c", "mkdir -p "+copyDir+"/target "+copyDir+"/node_modules/m && echo built >"+copyDir+"/target/out && echo dep >"+copyDir+"/node_modules/m/index.js")
		if _, err := p.Back(context.Background(), top, false); err != nil {
			t.Fatalf("back: %v", err)
		}
		write(t, top, "c.txt", "c changed for the second offload\n")
		res = offloadRepo(t, p, top)
		for _, f := range []string{"target/out", "node_modules/m/index.js"} {
			if _, err := r.b.Run("test", "-f", copyDir+"/"+f); err != nil {
				t.Errorf("the box's ignored %s did not survive the second offload: %v", f, err)
			}
		}
		if _, err := r.b.Run("test", "-e", copyDir+"/.env"); err == nil {
			t.Error("the host's .env (not opted in) reached the box")
		}
		if !res.Bundle {
			t.Error("the second offload sent no bundle (its S is new history)")
		}
		if _, err := p.Back(context.Background(), top, false); err != nil {
			t.Fatalf("back: %v", err)
		}
	})

	// Issue 39, Deliver 1 and 2, through the box's own rsync: the ignored
	// app/[locale]/.env.local (Next.js) and a[b].log never reach the box,
	// the tracked ab.log does, and a linked worktree inside the work tree
	// is not sent, so the copy equals S and back is the fast-forward.
	t.Run("WildcardNamesAndALinkedWorktree", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, _ := repo(t, p, "literal")
		write(t, top, ".gitignore", "target/\nnode_modules/\n.env*\n*.log\n")
		write(t, top, "ab.log", "tracked\n")
		git(t, top, "add", "-f", ".gitignore", "ab.log")
		git(t, top, "commit", "-q", "-m", "logs")
		write(t, top, "app/[locale]/.env.local", "TOKEN=next-local-never-sent\n")
		write(t, top, "a[b].log", "ignored\n")
		git(t, top, "worktree", "add", "-q", "wt")
		res := offloadRepo(t, p, top)
		copyDir := "/workspace/" + res.Name
		for _, f := range []string{"app/[locale]/.env.local", "a[b].log", "wt"} {
			if _, err := r.b.Run("test", "-e", copyDir+"/"+f); err == nil {
				t.Errorf("%s reached the box", f)
			}
		}
		if _, err := r.b.Run("test", "-f", copyDir+"/ab.log"); err != nil {
			t.Errorf("the tracked ab.log did not reach the box: %v", err)
		}
		back, err := p.Back(context.Background(), top, false)
		if err != nil {
			t.Fatalf("back: %v\nprogress:\n%s", err, r.progress)
		}
		if back.Merge.Case != packer.CaseFastForward {
			t.Errorf("back: %+v, want the fast-forward", back.Merge)
		}
	})

	// Contract: Offload, Preflight: a box CLI that is signed out is begin's
	// block with its remedy, and nothing changed here.
	t.Run("SignedOutCLIBlocks", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, key := repo(t, p, "signedout")
		r.b.Must(t, "runuser", "-u", "user", "--", "touch", "/home/user/.standin/signed-out")
		defer r.b.Must(t, "rm", "-f", "/home/user/.standin/signed-out")
		before := state(t, top)
		_, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
		var ref *packer.Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Msg, "Sign in in the box") || !hasFinding(ref.Findings, "Box CLI missing or signed out") {
			t.Fatalf("offload with a signed-out CLI: %v", err)
		}
		if rec, _ := p.Dirs.LoadRecord(key); rec != nil || state(t, top) != before || git(t, top, "for-each-ref", "refs/cocoonbox") != "" {
			t.Error("a refused offload changed something")
		}
		// And a box without the CLI: the block names the installer.
		r.b.Must(t, "mv", "/home/user/.local/bin/claude", "/home/user/.local/bin/claude.away")
		defer r.b.Must(t, "mv", "/home/user/.local/bin/claude.away", "/home/user/.local/bin/claude")
		_, err = p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
		if !errors.As(err, &ref) || !strings.Contains(ref.Msg, "Install in box") {
			t.Fatalf("offload with no claude in the box: %v", err)
		}
	})

	// Contract: Offload, Preflight: a box older than cbdesk:v22 is blocked
	// before anything reaches the box.
	t.Run("OldImageBlocks", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		p.Box.Image = "cbdesk:v21-base"
		top, key := repo(t, p, "oldimage")
		_, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
		var ref *packer.Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Msg, "upgrade the box first") {
			t.Fatalf("offload to cbdesk:v21: %v", err)
		}
		if out, _ := r.b.Sh("cat /home/user/.local/share/cocoonbox/offload/index.json"); strings.Contains(out, key) {
			t.Errorf("begin ran for a blocked offload: %s", out)
		}
	})

	// Contract: Offload, the send stream: a linked worktree (.git is a
	// file) is sent without .git, its HEAD and index in the stream; the
	// box copy is a plain repository built from the bundle, on the
	// worktree's branch, and back merges into the worktree.
	t.Run("LinkedWorktree", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		main, _ := repo(t, p, "linked-main")
		top := filepath.Join(t.TempDir(), "linked")
		git(t, main, "worktree", "add", "-q", "-b", "feature", top)
		write(t, top, "b.txt", "b staged in the worktree\n")
		git(t, top, "add", "b.txt")
		write(t, top, "c.txt", "c unstaged in the worktree\n")
		key := packer.RepoKey(top)
		if err := p.Dirs.Ensure(key); err != nil {
			t.Fatal(err)
		}
		write(t, p.Dirs.Repo(key), "handover.md", offloadtest.Handover("a worktree task", "standin: commit"))
		res := offloadRepo(t, p, top)
		copyDir := "/workspace/" + res.Name
		if got := strings.TrimSpace(r.b.MustSh(t, "runuser -u user -- git -C "+copyDir+" symbolic-ref HEAD")); got != "refs/heads/feature" {
			t.Errorf("the copy's HEAD is %q, want the worktree's branch", got)
		}
		if _, err := r.b.Run("test", "-d", copyDir+"/.git"); err != nil {
			t.Errorf("the copy's .git is not a directory: %v", err)
		}
		back, err := p.Back(context.Background(), top, false)
		if err != nil || back.Merge.Case != packer.CaseFastForward {
			t.Fatalf("back: %v %+v", err, back)
		}
		if got := git(t, top, "log", "-1", "--format=%s"); got != "standin turn 1" {
			t.Errorf("the worktree's HEAD is %q", got)
		}
		// The box's commit took what the worktree's index (sent in the
		// stream) had staged, and only that.
		if got := git(t, top, "show", "--name-only", "--format=", "HEAD"); got != "b.txt\nwork.txt" {
			t.Errorf("the box's commit has %q, want b.txt (staged here) and work.txt", got)
		}
		if git(t, main, "rev-parse", "main") == git(t, top, "rev-parse", "HEAD") {
			t.Error("the main worktree's branch moved")
		}
		if got := read(t, top, "c.txt"); got != "c unstaged in the worktree\n" {
			t.Errorf("c.txt = %q", got)
		}
	})

	// Contract: Offload, "Back, Mac side", step 2: no back within the
	// wait is a failure with the session's status, the BACK staying
	// queued for the CLI's next idle; the next back gets it.
	t.Run("BackWaitRunsOut", func(t *testing.T) {
		p := r.packer(t, t.TempDir())
		top, _ := repo(t, p, "busy", "standin: hold")
		offloadRepo(t, p, top)
		before := state(t, top)
		p.BackWait = 3 * time.Second
		_, err := p.Back(context.Background(), top, false)
		var f *packer.Failure
		if !errors.As(err, &f) || !strings.Contains(f.Error(), `session status "working"`) || !strings.Contains(f.Error(), "BACK stays queued") {
			t.Fatalf("back from a session that holds: %v", err)
		}
		if state(t, top) != before {
			t.Error("a back that ran out changed the repository")
		}
		r.b.Must(t, "runuser", "-u", "user", "--", "touch", "/home/user/.standin/release")
		p.BackWait = 90 * time.Second
		back, err := p.Back(context.Background(), top, false)
		if err != nil || back.Merge.Case != packer.CaseFastForward {
			t.Fatalf("the next back: %v %+v", err, back)
		}
	})

	t.Run("KilledAtEachStep", func(t *testing.T) { killedAtEachStep(t, r) })
	t.Run("BackKilled", func(t *testing.T) { killedBack(t, r) })
	t.Run("LostAnswers", func(t *testing.T) { lostAnswers(t, r) })
	t.Run("FetchFailsThenTheCLIStops", func(t *testing.T) { fetchFailsThenTheCLIStops(t, r) })
	t.Run("Corpus", func(t *testing.T) { corpus(t, r) })
	t.Run("HistoryBounded", func(t *testing.T) { historyBounded(t, r) })
	t.Run("RealRepository", func(t *testing.T) { realRepository(t, r) })
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func hasFinding(fs []packer.Finding, check string) bool {
	for _, f := range fs {
		if f.Check == check {
			return true
		}
	}
	return false
}
