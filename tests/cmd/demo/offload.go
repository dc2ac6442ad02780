package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/offloadbox"
)

func init() {
	register(60, "offload: a repository with an uncommitted change into the box and back (fast-forward, then a clean merge)", offloadStep)
}

// offloadStep plays the user's coding CLI: the host packer offloads a
// small repository into the box, where the stand-in CLI (as claude)
// commits, and brings it back twice: a fast-forward, then a clean merge
// with the user's own commit and files. The packer reaches the box the
// product's way, `cocoonbox rsh --box NAME` (packer.RSH), for its verbs,
// rsync and git.
func offloadStep(ctx context.Context, d *demo, r *report) {
	b := d.box
	tmp, err := os.MkdirTemp("", "cocoonbox-demo-offload-")
	if err != nil {
		r.bad("offload", "%v", err)
		return
	}
	defer os.RemoveAll(tmp)
	if err := offloadbox.PutStandin(b); err != nil {
		r.bad("offload", "the stand-in CLI: %v", err)
		return
	}
	tr := packer.RSH{Program: d.cli.Bin, Box: d.name}
	p := &packer.Packer{Dirs: packer.Dirs{Root: filepath.Join(tmp, "data/cocoonbox/offload")}, Transport: tr,
		Box: packer.BoxInfo{ID: d.id, Name: d.name, Image: d.image}, Yes: true, BackWait: 90 * time.Second}
	top := filepath.Join(tmp, "demo-repo")
	g := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=demo", "-c", "user.email=demo@invalid", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = top
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	put := func(name, content string) { os.WriteFile(filepath.Join(top, name), []byte(content), 0o644) }
	os.MkdirAll(top, 0o755)
	g("init", "-q")
	put("a.txt", "one\n")
	g("add", ".")
	g("commit", "-q", "-m", "one")
	put("a.txt", "one, and an uncommitted change\n")
	key := packer.RepoKey(top)
	p.Dirs.Ensure(key)
	ho := "# Hand-over: the demo's task\n"
	for _, h := range offload.HandoverHeadings {
		ho += h + "\nnone\n"
	}
	os.WriteFile(p.Dirs.Handover(key), []byte(ho+"standin: commit\n"), 0o600)

	round := func(what string) bool {
		res, err := p.Offload(ctx, packer.OffloadOptions{Dir: top, Kind: "claude"})
		if err != nil || !res.Accepted {
			r.bad("offload", "%s: %v", what, err)
			return false
		}
		r.ok("offload", "%s: %s in %s, tmux %s (rsync %d ms, send %d ms)", what, res.ID, res.Dir, res.Tmux, res.Timings["rsync"], res.Timings["send"])
		return true
	}
	if !round("first") {
		return
	}
	back, err := p.Back(ctx, top, false)
	switch {
	case err != nil:
		r.bad("back", "%v", err)
		return
	case back.Merge.Case != packer.CaseFastForward || g("log", "-1", "--format=%s") != "standin turn 1" || !strings.Contains(g("status", "--porcelain"), "M a.txt"):
		r.bad("back", "%+v, HEAD %q, status %q", back.Merge, g("log", "-1", "--format=%s"), g("status", "--porcelain"))
		return
	}
	r.ok("back", "fast-forward: HEAD is the box's commit %q, a.txt still uncommitted (%d ms)", g("log", "-1", "--format=%s"), back.Timings["merge"])

	if !round("second") {
		return
	}
	put("mine.txt", "the user's own commit meanwhile\n")
	g("add", "mine.txt")
	g("commit", "-q", "-m", "the user's commit", "mine.txt")
	put("notes.txt", "untracked notes\n")
	back, err = p.Back(ctx, top, false)
	notes, _ := os.ReadFile(filepath.Join(top, "notes.txt"))
	work, _ := os.ReadFile(filepath.Join(top, "work.txt"))
	switch {
	case err != nil:
		r.bad("back", "%v", err)
	case back.Merge.Case != packer.CaseMerge || string(notes) != "untracked notes\n" || !strings.Contains(string(work), "turn 1"):
		r.bad("back", "%+v, notes %q, work.txt %q", back.Merge, notes, work)
	default:
		r.ok("back", "clean merge: %s applied uncommitted beside the user's commit, notes.txt untouched", strings.Join(back.Merge.Applied, ", "))
	}
	r.info("offload", "refs: %s", strings.ReplaceAll(g("for-each-ref", "--format=%(refname:short)", "refs/cocoonbox", "refs/heads"), "\n", " "))
}
