package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

func init() {
	register(60, "offload: cocoonbox offload and back take a clone of a bare origin with an uncommitted change into the box and back (fast-forward, then a clean merge)", offloadStep)
}

// offloadStep plays the user at their own coding CLI: the product's
// `cocoonbox offload` and `cocoonbox back` binaries (out/cocoonbox, as
// signed in above) offload a clone of a bare origin (origin/HEAD and two
// remote branches, a local commit, an uncommitted change) into the box,
// where the stand-in CLI (tests/offload/standin, installed as claude: the
// real claude needs its service to run a turn) commits, and bring it back
// twice: a fast-forward, then a clean merge with the user's own commit and
// files. The CLI reaches the box the product's way, `cocoonbox rsh`, for
// its verbs, rsync and git.
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
	top := filepath.Join(tmp, "demo-repo")
	g := func(dir string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=demo", "-c", "user.email=demo@invalid", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	put := func(name, content string) { os.WriteFile(filepath.Join(top, name), []byte(content), 0o644) }
	// The origin: a bare repository with main, feature/a and fix-b; the
	// user's clone has origin/HEAD, a commit of its own and a change.
	origin, seed := filepath.Join(tmp, "origin.git"), filepath.Join(tmp, "seed")
	g(tmp, "init", "-q", "--bare", origin)
	g(tmp, "clone", "-q", origin, seed)
	os.WriteFile(filepath.Join(seed, "a.txt"), []byte("one\n"), 0o644)
	g(seed, "add", ".")
	g(seed, "commit", "-q", "-m", "one")
	g(seed, "push", "-q", "origin", "HEAD:main", "HEAD:feature/a", "HEAD:fix-b")
	g(tmp, "clone", "-q", origin, top)
	put("local.txt", "a commit of the user's, not pushed\n")
	g(top, "add", "local.txt")
	g(top, "commit", "-q", "-m", "local")
	put("a.txt", "one, and an uncommitted change\n")
	if got := g(top, "symbolic-ref", "refs/remotes/origin/HEAD"); got != "refs/remotes/origin/main" {
		r.bad("offload", "the clone's origin/HEAD is %q", got)
		return
	}
	// The CLI's offload directory: XDG_DATA_HOME of the demo's own.
	data := filepath.Join(tmp, "data")
	run := func(args ...string) (map[string]any, error) {
		cmd := exec.CommandContext(ctx, d.cli.Bin, args...)
		cmd.Dir = top
		cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+d.cli.ConfigDir, "XDG_DATA_HOME="+data), d.cli.Env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var res map[string]any
		if jerr := json.Unmarshal(out, &res); jerr != nil {
			return nil, fmt.Errorf("cocoonbox %s: %v: stdout %q, stderr %s", strings.Join(args, " "), err, out, stderr.String())
		}
		if err != nil {
			return res, fmt.Errorf("cocoonbox %s: %v: %v", strings.Join(args, " "), err, res["error"])
		}
		return res, nil
	}
	path := filepath.Join(data, "cocoonbox/offload", packer.RepoKey(top), "handover.md")
	ho := "# Hand-over: the demo's task\n"
	for _, h := range offload.HandoverHeadings {
		ho += h + "\nnone\n"
	}
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte(ho+"standin: commit\n"), 0o600)

	round := func(what string) bool {
		res, err := run("offload", "--box", d.name, "--yes", "--json")
		if err != nil || res["accepted"] != true {
			r.bad("cocoonbox offload", "%s: %v %v", what, err, res)
			return false
		}
		ms, _ := res["timings_ms"].(map[string]any)
		r.ok("cocoonbox offload", "%s: %v in %v, tmux %v (rsync %v ms, send %v ms)", what, res["id"], res["dir"], res["tmux"], ms["rsync"], ms["send"])
		return true
	}
	merge := func(res map[string]any) map[string]any { m, _ := res["merge"].(map[string]any); return m }
	if !round("first, of the clone") {
		return
	}
	back, err := run("back", "--json")
	switch {
	case err != nil:
		r.bad("cocoonbox back", "%v", err)
		return
	case merge(back)["case"] != packer.CaseFastForward || g(top, "log", "-1", "--format=%s") != "standin turn 1" || !strings.Contains(g(top, "status", "--porcelain"), "M a.txt"):
		r.bad("cocoonbox back", "%v, HEAD %q, status %q", back, g(top, "log", "-1", "--format=%s"), g(top, "status", "--porcelain"))
		return
	}
	r.ok("cocoonbox back", "fast-forward: HEAD is the box's commit %q, a.txt still uncommitted", g(top, "log", "-1", "--format=%s"))

	if !round("second") {
		return
	}
	put("mine.txt", "the user's own commit meanwhile\n")
	g(top, "add", "mine.txt")
	g(top, "commit", "-q", "-m", "the user's commit", "mine.txt")
	put("notes.txt", "untracked notes\n")
	back, err = run("back", "--json")
	notes, _ := os.ReadFile(filepath.Join(top, "notes.txt"))
	work, _ := os.ReadFile(filepath.Join(top, "work.txt"))
	switch {
	case err != nil:
		r.bad("cocoonbox back", "%v", err)
	case merge(back)["case"] != packer.CaseMerge || string(notes) != "untracked notes\n" || !strings.Contains(string(work), "turn 1"):
		r.bad("cocoonbox back", "%v, notes %q, work.txt %q", back, notes, work)
	default:
		r.ok("cocoonbox back", "clean merge: %v applied uncommitted beside the user's commit, notes.txt untouched", merge(back)["applied"])
	}
	r.info("offload", "refs: %s", strings.ReplaceAll(g(top, "for-each-ref", "--format=%(refname:short)", "refs/cocoonbox", "refs/heads", "refs/remotes"), "\n", " "))
}
