package inbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cloneOfBareOrigin makes a bare origin with main and two more branches,
// and a "Mac" clone of it (origin/HEAD a symref to origin/main, as git
// clone leaves it) with an uncommitted change; it returns the clone and
// the origin.
func (e *env) cloneOfBareOrigin(name string) (clone, origin string) {
	e.t.Helper()
	origin = filepath.Join(e.dir, "origins", name+".git")
	seed := filepath.Join(e.dir, "seeds", name)
	must(e.t, os.MkdirAll(seed, 0o755))
	git(e.t, seed, "init", "-q")
	must(e.t, os.WriteFile(filepath.Join(seed, "a.txt"), []byte("one\n"), 0o644))
	git(e.t, seed, "add", ".")
	git(e.t, seed, "commit", "-q", "-m", "one")
	for _, b := range []string{"feature", "release"} {
		git(e.t, seed, "branch", b)
	}
	git(e.t, filepath.Dir(seed), "clone", "-q", "--bare", seed, origin)
	clone = filepath.Join(e.dir, "mac", name)
	git(e.t, e.dir, "clone", "-q", origin, clone)
	must(e.t, os.WriteFile(filepath.Join(clone, "a.txt"), []byte("one, uncommitted\n"), 0o644))
	return clone, origin
}

// moveRemote pushes a new commit to origin's main from elsewhere and
// fetches it into clone, so the clone's origin/main moves.
func (e *env) moveRemote(clone, origin, msg string) {
	e.t.Helper()
	other := filepath.Join(e.dir, "other-"+msg)
	git(e.t, e.dir, "clone", "-q", origin, other)
	must(e.t, os.WriteFile(filepath.Join(other, msg+".txt"), []byte(msg+"\n"), 0o644))
	git(e.t, other, "add", ".")
	git(e.t, other, "commit", "-q", "-m", msg)
	git(e.t, other, "push", "-q", "origin", "main")
	git(e.t, clone, "fetch", "-q")
}

// Contract: Offload, send steps ("then sets its refs"): the first offload
// of a clone, whose copy has the symref refs/remotes/origin/HEAD from
// rsync and whose bundle names both it and origin/main, is taken (git
// update-ref --stdin refused "multiple updates for
// 'refs/remotes/origin/main' (including one via symref ...)"), and so is
// the next one after a fetch moved origin/main; origin/HEAD stays a
// symref in the copy and every ref equals the host's.
func TestSendOfACloneWithOriginHEAD(t *testing.T) {
	e := newEnv(t)
	clone, origin := e.cloneOfBareOrigin("cl")
	for i, id := range []string{"off1", "off2"} {
		if i > 0 {
			e.mustVerb(nil, "end", "--repo", "kc")
			e.moveRemote(clone, origin, "moved")
		}
		send, code := e.macSide(clone, "kc", "cl", "claude", id)
		if code != 0 || send["accepted"] != true {
			t.Fatalf("offload %s of a clone: send %d %v", id, code, send)
		}
		copyDir := e.paths.Copy("cl")
		if got := git(t, copyDir, "symbolic-ref", "refs/remotes/origin/HEAD"); got != "refs/remotes/origin/main" {
			t.Errorf("offload %s: the copy's origin/HEAD is %q, not a symref to origin/main", id, got)
		}
		want := git(t, clone, "for-each-ref", "--format=%(refname) %(objectname) %(symref)", "refs/remotes", "refs/heads")
		if got := git(t, copyDir, "for-each-ref", "--format=%(refname) %(objectname) %(symref)", "refs/remotes", "refs/heads"); got != want {
			t.Errorf("offload %s: the copy's refs\n%s\nwant the host's\n%s", id, got, want)
		}
	}
}

// Contract: Offload, Mac side ("the box's own ignored files stay"): an
// ignored file the box made (.env, tmp/old.log beside the tracked
// tmp/keep.txt) and the host has not is still there after the next
// offload's rsync --delete: begin lists ignored files, not only
// directories.
func TestTheBoxsOwnIgnoredFilesStay(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("ig")
	must(t, os.WriteFile(filepath.Join(host, ".gitignore"), []byte("target/\n.env\n*.log\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(host, "tmp"), 0o755))
	must(t, os.WriteFile(filepath.Join(host, "tmp/keep.txt"), []byte("tracked\n"), 0o644))
	git(t, host, "add", ".")
	git(t, host, "commit", "-q", "-m", "tmp/ and *.log")
	if _, code := e.macSide(host, "kg", "ig", "claude", "off1"); code != 0 {
		t.Fatal("the first send failed")
	}
	copyDir := e.paths.Copy("ig")
	own := map[string]string{".env": "BOX=1\n", "tmp/old.log": "the box's log\n", "target/out.o": "built in the box\n"}
	for p, body := range own {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(copyDir, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(copyDir, p), []byte(body), 0o644))
	}
	e.mustVerb(nil, "end", "--repo", "kg")
	if _, code := e.macSide(host, "kg", "ig", "claude", "off2"); code != 0 {
		t.Fatal("the second send failed")
	}
	for p, body := range own {
		if got, err := os.ReadFile(filepath.Join(copyDir, p)); err != nil || string(got) != body {
			t.Errorf("the box's own ignored %s after the next offload: %q %v", p, got, err)
		}
	}
}

// Contract: Offload, send steps ("its prompt hook, else a new transcript
// file"): with the hooks blocked, a claude session in a copy whose name
// has _ and . is seen taking its first prompt by its transcript, under
// the project directory the CLI makes (every non-alphanumeric character
// as -; the inbox mapped only / and .).
func TestTranscriptFallbackForANameWithUnderscore(t *testing.T) {
	e := newEnv(t)
	must(t, os.MkdirAll(filepath.Join(e.home, ".standin"), 0o700))
	must(t, os.WriteFile(filepath.Join(e.home, ".standin/no-hooks"), nil, 0o600))
	send, code := e.macSide(e.hostRepo("my_app.v2"), "ku", "my_app.v2", "claude", "off1")
	if code != 0 || send["accepted"] != true {
		t.Fatalf("send with the hooks blocked: %d %v", code, send)
	}
	st := e.mustVerb(nil, "status", "--repo", "ku")["sessions"].([]any)[0].(map[string]any)
	if st["status"] != "working" || st["hooks_silent"] != true || st["transcript_mtime_ms"].(float64) == 0 {
		t.Errorf("status with the hooks blocked: %v", st)
	}
}

// Deliver 5 of issue 22: the inbox's tmux never reads the user's
// ~/.tmux.conf; there remain-on-exit on kept a dead CLI's pane, and its
// session stayed working. A server the inbox starts reads its pinned
// config (-f); in the user's own server, already running with that
// config, the session's window has it off, so the session ends with the
// CLI; and a pane kept anyway (a pane option the user's hook set) is seen
// dead.
func TestRemainOnExitInTheUsersTmuxConf(t *testing.T) {
	for _, c := range []struct {
		name              string
		usersServer, pane bool
	}{{"the inbox's server", false, false}, {"the user's server", true, false}, {"a pane kept by the user", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			must(t, os.WriteFile(filepath.Join(e.home, ".tmux.conf"), []byte("set -g remain-on-exit on\n"), 0o644))
			if c.usersServer {
				must(t, exec.Command("tmux", "new-session", "-d", "-s", "mine").Run())
			}
			if _, code := e.macSide(e.hostRepo("roe"), "kr", "roe", "claude", "off1"); code != 0 {
				t.Fatal("send failed")
			}
			out, _ := exec.Command("tmux", "show-options", "-g", "remain-on-exit").Output()
			if got := strings.TrimSpace(string(out)); got != map[bool]string{false: "remain-on-exit off", true: "remain-on-exit on"}[c.usersServer] {
				t.Errorf("the server's remain-on-exit: %q", got)
			}
			e.waitFor("idle", func() (bool, string) { s := e.status("kr"); return s == "idle", s })
			if c.pane {
				must(t, exec.Command("tmux", "set-option", "-p", "-t", "=cb-off-kr-claude:", "remain-on-exit", "on").Run())
			}
			e.mustVerb([]byte("standin: die"), "send", "--repo", "kr", "--message")
			e.waitFor("stopped", func() (bool, string) { s := e.status("kr"); return s == "stopped", s })
			if gone := exec.Command("tmux", "has-session", "-t", "=cb-off-kr-claude").Run() != nil; gone == c.pane {
				t.Errorf("the session of the dead CLI: gone %v", gone)
			}
		})
	}
}

// Deliver 5 of issue 22: an interrupt sent while the session is still
// starting waits until the CLI took its first prompt, then is delivered
// (Esc, the paste, Enter; or at its idle); pasted at once, a TUI still
// starting drops it while the inbox marked it delivered.
func TestAnInterruptWaitsForTheFirstPrompt(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("ia")
	hold := filepath.Join(e.home, ".standin/hold-start")
	must(t, os.MkdirAll(filepath.Dir(hold), 0o700))
	must(t, os.WriteFile(hold, nil, 0o600))
	sent := make(chan int, 1)
	go func() { _, code := e.macSide(host, "ka", "ia", "claude", "off1"); sent <- code }()
	e.waitFor("the session starting", func() (bool, string) {
		s := e.status("ka")
		return s == "starting" && e.standin("claude", "argv.json") != "", s
	})
	r := e.mustVerb([]byte("stop that"), "send", "--repo", "ka", "--message", "--interrupt")
	if r["delivery"] != "queued" {
		t.Errorf("an interrupt to a starting session: %v, want queued", r)
	}
	must(t, os.Remove(hold))
	if code := <-sent; code != 0 {
		t.Fatalf("send exited %d", code)
	}
	e.waitFor("the interrupt's message after the first prompt", func() (bool, string) {
		m := e.messages("claude")
		return len(m) == 2 && m[1] == "stop that", fmt.Sprintf("%q; events %s", m, e.standin("claude", "events.jsonl"))
	})
	// The stand-in's first turn ends at once, so the message may come as
	// the next idle's (no Esc needed); either way nothing was dropped.
	if ev := e.standin("claude", "events.jsonl"); strings.Contains(ev, "dropped") {
		t.Errorf("the CLI's events: %s; want nothing dropped", ev)
	}
}

// Contract: Offload, Hand-over ("at most 256 KiB") and Box CLI in tmux:
// a first prompt with a 200 KiB hand-over reaches the CLI, which takes it
// (accepted): over MaxPromptArg the argument tells it to read the prompt
// file, which holds the whole prompt (as one argv word it failed the exec
// with "Argument list too long" and the session stayed starting).
func TestA200KiBHandoverReachesTheCLI(t *testing.T) {
	for _, cli := range []string{"claude", "codex"} {
		t.Run(cli, func(t *testing.T) {
			e := newEnv(t)
			var lines []string
			for i := 0; len(lines)*64 < 200<<10; i++ {
				lines = append(lines, fmt.Sprintf("- step %05d of a long plan, written out in the hand-over in full", i))
			}
			e.handover = Handover("a long task", lines...)
			if n := len(e.handover); n < 200<<10 || n > 256<<10 {
				t.Fatalf("the hand-over is %d bytes", n)
			}
			send, code := e.macSide(e.hostRepo("long"), "kl", "long", cli, "off1")
			if code != 0 || send["accepted"] != true {
				t.Fatalf("send of a 200 KiB hand-over: %d %v", code, send)
			}
			promptFile := filepath.Join(e.paths.State, "kl/prompt.md")
			prompt, err := os.ReadFile(promptFile)
			must(t, err)
			if !strings.Contains(string(prompt), e.handover) {
				t.Error("prompt.md lacks the hand-over")
			}
			m := e.messages(cli)
			if len(m) == 0 || !strings.Contains(m[0], promptFile) || !strings.Contains(m[0], fmt.Sprint(len(prompt))) {
				t.Errorf("the CLI's first prompt %.200q does not name %s and its size", m, promptFile)
			}
		})
	}
}

// A copy that an offload killed at send left with the host's .git but
// without .git/objects (rsync leaves them out; the bundle never came):
// the next begin still lists the box's own ignored files in it (git did
// not read such a copy, and begin listed none, so the next rsync deleted
// them), and no ref of it (their objects are missing).
func TestBeginOnACopyWithoutObjectsListsItsIgnoredFiles(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("nob")
	copyDir := e.paths.Copy("nob")
	out, err := exec.Command("rsync", "-a", "--exclude=/.git/objects/", host+"/", copyDir+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("rsync: %v: %s", err, out)
	}
	must(t, os.WriteFile(filepath.Join(copyDir, ".env"), []byte("BOX=1\n"), 0o644))
	begin := e.mustVerb(nil, "begin", "--repo", "kn", "--name", "nob", "--kind", "claude", "--id", "off1")
	if ign := fmt.Sprint(begin["ignored"]); !strings.Contains(ign, ".env") {
		t.Errorf("begin's ignored on a copy without objects: %s, want .env", ign)
	}
	if refs, _ := begin["refs"].(map[string]any); len(refs) != 0 {
		t.Errorf("begin's refs on a copy without objects: %v, want none", refs)
	}
}
