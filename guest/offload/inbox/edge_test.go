package inbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Contract: Offload, Box CLI in tmux: a CLI that dies without a
// SessionEnd hook is stopped (its pane ended with it), not working for
// ever.
func TestACLIThatDiesWithoutAHookIsStopped(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("die"), "kd", "die", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("kd"); return s == "idle", s })
	e.mustVerb([]byte("standin: die"), "send", "--repo", "kd", "--message")
	e.waitFor("stopped", func() (bool, string) { s := e.status("kd"); return s == "stopped", s })
	resp := e.mustVerb(nil, "status", "--repo", "kd")
	if s := resp["sessions"].([]any)[0].(map[string]any); s["tmux_alive"] != false || s["copy"] != "unreturned" {
		t.Errorf("status of a dead CLI: %v", s)
	}
	// Copy states: the copy is unreturned (a session ran, no end): begin
	// refuses it, nothing changed.
	r, code, _ := e.verb(nil, "begin", "--repo", "kd", "--name", "die", "--kind", "claude", "--id", "off2")
	if code != 3 || !strings.Contains(fmt.Sprint(r["error"]), "unreturned: bring the last offload back first") {
		t.Errorf("begin on an unreturned copy: %d %v", code, r)
	}
}

// begin's cli.hooks_blocked names the first settings file that turns our
// hooks off (here the user's ~/.claude/settings.json).
func TestBeginNamesTheFileThatBlocksHooks(t *testing.T) {
	e := newEnv(t)
	must(t, os.MkdirAll(filepath.Join(e.home, ".claude"), 0o700))
	must(t, os.WriteFile(filepath.Join(e.home, ".claude/settings.json"), []byte(`{"disableAllHooks": true}`), 0o600))
	r := e.mustVerb(nil, "begin", "--repo", "kh", "--name", "hb", "--kind", "claude", "--id", "off1")
	if got := r["cli"].(map[string]any)["hooks_blocked"]; got != filepath.Join(e.home, ".claude/settings.json") {
		t.Errorf("hooks_blocked %v", got)
	}
}

// Notification → waiting_for_user (an idle state: a message is pasted);
// StopFailure → idle, as Stop.
func TestNotificationAndStopFailureHooks(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("nt"), "kn", "nt", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("kn"); return s == "idle", s })
	for hook, want := range map[string]string{"Notification": "waiting_for_user", "UserPromptSubmit": "working", "StopFailure": "idle"} {
		e.mustVerb([]byte(`{"hook_event_name":"`+hook+`"}`), "event", "--repo", "kn", "--cli", "claude", "--hook", hook)
		if s := e.status("kn"); s != want {
			t.Errorf("after %s: %s, want %s", hook, s, want)
		}
	}
	// SessionEnd with reason clear keeps the session.
	e.mustVerb([]byte(`{"reason":"clear"}`), "event", "--repo", "kn", "--cli", "claude", "--hook", "SessionEnd")
	if s := e.status("kn"); s == "stopped" {
		t.Error("SessionEnd with reason clear stopped the session")
	}
}

// At most 3 sessions of the box are not stopped: a fourth start is
// refused, and begin blocks on it.
func TestAFourthSessionIsRefused(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 3; i++ {
		key := fmt.Sprintf("s%d", i)
		if _, code := e.macSide(e.hostRepo(key), key, key, "claude", "off1"); code != 0 {
			t.Fatalf("send %d failed", i)
		}
	}
	resp, code, _ := e.verb(nil, "begin", "--repo", "s4", "--name", "s4", "--kind", "claude", "--id", "off1")
	if code != 3 || !strings.Contains(fmt.Sprint(resp["findings"]), "Three box sessions running") {
		t.Fatalf("begin with three sessions: %d %v", code, resp)
	}
}

// Contract: Offload, Preflight, "Box tools missing": the tools are asked
// in one login shell beside the CLI's checks; the finding names exactly
// the tools that shell does not find (here mise and tmux), and the CLI's
// own answer still comes.
func TestBeginNamesTheBoxToolsALoginShellLacks(t *testing.T) {
	e := newEnv(t)
	only := filepath.Join(e.dir, "only")
	must(t, os.MkdirAll(only, 0o755))
	for _, tool := range []string{"git", "rsync", "bash", "cat"} {
		path, err := exec.LookPath(tool)
		must(t, err)
		must(t, os.Symlink(path, filepath.Join(only, tool)))
	}
	must(t, os.WriteFile(filepath.Join(e.home, ".profile"), []byte("export PATH="+e.bin+":"+only+"\n"), 0o644))
	resp, code, _ := e.verb(nil, "begin", "--repo", "kt", "--name", "kt", "--kind", "claude", "--id", "off1")
	findings := fmt.Sprint(resp["findings"])
	if code != 3 || !strings.Contains(findings, "not on a login shell's PATH: tmux, mise") {
		t.Fatalf("begin without tmux and mise: %d %v", code, resp)
	}
	if v, _ := resp["cli"].(map[string]any)["version"].(string); v == "" {
		t.Errorf("the CLI's version is missing beside the tools' finding: %v", resp["cli"])
	}
}

// restart starts the repo's CLI afresh from its last hand-over.
func TestRestartFromTheLastHandover(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("rs"), "kr", "rs", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("kr"); return s == "idle", s })
	e.mustVerb([]byte("standin: progress"), "send", "--repo", "kr", "--message")
	e.waitFor("the progress post", func() (bool, string) {
		_, err := os.Stat(filepath.Join(e.paths.State, "kr/handover.md"))
		return err == nil, fmt.Sprint(err)
	})
	e.waitFor("idle", func() (bool, string) { s := e.status("kr"); return s == "idle", s })
	if r := e.mustVerb(nil, "restart", "--repo", "kr"); r["delivery"] != "started" {
		t.Fatalf("restart: %v", r)
	}
	e.waitFor("the restarted session's first prompt", func() (bool, string) {
		m := e.messages("claude")
		last := m[len(m)-1]
		return strings.HasPrefix(last, "Your previous session") && strings.Contains(last, "# Hand-over: standin progress"), last[:min(60, len(last))]
	})
}

// State excludes: each send writes the copy's git-ignored directories to
// excludes, one absolute path a line, keeping other copies' lines.
func TestSendWritesExcludes(t *testing.T) {
	e := newEnv(t)
	must(t, os.MkdirAll(filepath.Join(e.paths.State), 0o700))
	must(t, os.WriteFile(filepath.Join(e.paths.State, "excludes"), []byte("/workspace/other/node_modules/\n"), 0o600))
	host := e.hostRepo("ex")
	// target/ built in the box (the host's own is left out of rsync).
	must(t, os.MkdirAll(filepath.Join(e.paths.Copy("ex"), "target"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.paths.Copy("ex"), "target", "out.o"), []byte("x"), 0o644))
	if _, code := e.macSide(host, "kx", "ex", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	data, _ := os.ReadFile(filepath.Join(e.paths.State, "excludes"))
	lines := []string{"/workspace/other/node_modules/", e.paths.Copy("ex") + "/target/"}
	sort.Strings(lines)
	if want := strings.Join(lines, "\n") + "\n"; string(data) != want {
		t.Errorf("excludes %q, want %q", data, want)
	}
}

// Contract: Offload, Secrets: a file:<repo path> secret lands on the
// tmpfs and the copy's path is a link to it; wipe-secrets removes both.
func TestFileSecretIsALinkAndWipeSecretsRemovesIt(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("fs"), "kf", "fs", "claude", "off1", [2]string{"secrets/file/.env", "TOKEN=abc"}); code != 0 {
		t.Fatal("send failed")
	}
	link := filepath.Join(e.paths.Copy("fs"), ".env")
	target, err := os.Readlink(link)
	if err != nil || target != filepath.Join(e.paths.Secrets, "kf/file/.env") {
		t.Fatalf(".env in the copy: %q %v", target, err)
	}
	if data, _ := os.ReadFile(link); string(data) != "TOKEN=abc" {
		t.Errorf("through the link: %q", data)
	}
	e.mustVerb(nil, "wipe-secrets", "--repo", "kf")
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the link is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.paths.Secrets, "kf")); !os.IsNotExist(err) {
		t.Errorf("the secrets are left: %v", err)
	}
}

// Contract: Offload, Mac side: a linked worktree (.git is a file) is sent
// without .git; the stream carries its HEAD and index, and the box copy is
// a plain repository built from the bundle.
func TestLinkedWorktreeBecomesAPlainRepository(t *testing.T) {
	e := newEnv(t)
	main := e.hostRepo("wtmain")
	wt := filepath.Join(e.dir, "mac/wt")
	git(t, main, "worktree", "add", "-q", "-b", "feature", wt)
	os.WriteFile(filepath.Join(wt, "a.txt"), []byte("in the worktree\n"), 0o644)
	begin := e.mustVerb(nil, "begin", "--repo", "kw", "--name", "wt", "--kind", "claude", "--id", "off1")
	copyDir := begin["dir"].(string)
	idx := filepath.Join(e.dir, "wt-index")
	gitDir := git(t, wt, "rev-parse", "--git-dir")
	data, _ := os.ReadFile(filepath.Join(gitDir, "index"))
	os.WriteFile(idx, data, 0o600)
	cmd := exec.Command("sh", "-c", `GIT_INDEX_FILE="$1" git add -A && GIT_INDEX_FILE="$1" git write-tree`, "sh", idx)
	cmd.Dir = wt
	tree, err := cmd.Output()
	must(t, err)
	s := git(t, wt, "commit-tree", strings.TrimSpace(string(tree)), "-p", "HEAD", "-m", "S")
	git(t, wt, "update-ref", "refs/cocoonbox/base/off1", s)
	if out, err := exec.Command("rsync", "-a", "--exclude=/.git", wt+"/", copyDir+"/").CombinedOutput(); err != nil {
		t.Fatalf("rsync: %v %s", err, out)
	}
	git(t, wt, "bundle", "create", filepath.Join(e.dir, "wt.bundle"), "--all")
	bundle, _ := os.ReadFile(filepath.Join(e.dir, "wt.bundle"))
	head, _ := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	resp, code, stderr := e.verb(tarOf(t, [2]string{"handover.md", Handover("wt")}, [2]string{"offload.bundle", string(bundle)},
		[2]string{"HEAD", string(head)}, [2]string{"index", string(data)}), "send", "--repo", "kw", "--kind", "claude", "--id", "off1")
	if code != 0 {
		t.Fatalf("send of a linked worktree: %d %v %s", code, resp, stderr)
	}
	if fi, err := os.Stat(filepath.Join(copyDir, ".git")); err != nil || !fi.IsDir() {
		t.Fatalf("the copy's .git is not a directory: %v", err)
	}
	if b := git(t, copyDir, "symbolic-ref", "--short", "HEAD"); b != "feature" {
		t.Errorf("the copy's branch is %s", b)
	}
	if st := git(t, copyDir, "status", "--short"); st != "M a.txt" {
		t.Errorf("the copy's status %q, want the worktree's uncommitted change", st)
	}
}

// Contract: Offload, status: every field of a session line, as the host,
// the app and the api's idle check read them.
func TestStatusFields(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("st"), "ks", "st", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("ks"); return s == "idle", s })
	e.mustVerb([]byte("standin: progress"), "send", "--repo", "ks", "--message")
	e.waitFor("the progress entry", func() (bool, string) {
		es, _ := e.mustVerb(nil, "read", "--repo", "ks")["entries"].([]any)
		return len(es) == 1, fmt.Sprint(es)
	})
	e.waitFor("idle", func() (bool, string) { s := e.status("ks"); return s == "idle", s })
	s := e.mustVerb(nil, "status")["sessions"].([]any)[0].(map[string]any)
	want := map[string]any{"repo": "ks", "name": "st", "cli": "claude", "offload_id": "off1", "status": "idle",
		"copy": "busy", "tmux_alive": true, "hooks_silent": false, "inbox_seq": float64(2), "outbox_seq": float64(1)}
	for k, v := range want {
		if s[k] != v {
			t.Errorf("status %s = %v, want %v", k, s[k], v)
		}
	}
	for _, k := range []string{"hook_at_ms", "transcript_mtime_ms", "window_activity_ms"} {
		if v, _ := s[k].(float64); v <= 0 {
			t.Errorf("status %s = %v, want a time", k, s[k])
		}
	}
}

// A hook's report that reaches the inbox twice (the event verb sends it
// again when the answer is lost) is applied once: a second idle report
// would paste the next queued message into a CLI that the first one's
// message already keeps busy. A report with another id is applied (the
// control case).
func TestHookReportWithTheSameIDIsAppliedOnce(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("dup"), "kdup", "dup", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("kdup"); return s == "idle", s })
	e.hold("kdup")
	for _, m := range []string{"first queued", "second queued"} {
		if r := e.mustVerb([]byte(m), "send", "--repo", "kdup", "--message"); r["delivery"] != "queued" {
			t.Fatalf("%s: %v", m, r)
		}
	}
	stop := func(id string) {
		t.Helper()
		if _, err := offload.Call(e.paths.Socket, &offload.Request{Op: "event", Repo: "kdup", CLI: "claude", Hook: "Stop", RequestID: id}, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	states := func() string {
		msgs, err := (offload.Store{Paths: e.paths}).Messages("kdup")
		must(t, err)
		var out []string
		for _, m := range msgs {
			out = append(out, m.Body+"="+m.State)
		}
		return strings.Join(out, ", ")
	}
	// The delivery follows a report KeySettle later (deliverSoon); the
	// repeated report schedules none, so once the first message is
	// delivered nothing more is on its way.
	stop("report-1")
	stop("report-1")
	e.waitFor("the first message delivered", func() (bool, string) {
		got := states()
		return strings.Contains(got, "first queued=delivered"), got
	})
	if got := states(); !strings.Contains(got, "second queued=queued") {
		t.Fatalf("after one report sent twice: %s; want the first message delivered, the second still queued", got)
	}
	stop("report-2")
	e.waitFor("another report applied", func() (bool, string) {
		got := states()
		return strings.Contains(got, "second queued=delivered"), got
	})
	must(t, os.WriteFile(filepath.Join(e.home, ".standin/release"), nil, 0o600))
}
