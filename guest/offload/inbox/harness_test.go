package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"

	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/inbox"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The host-level round: the real inbox in this process, the real
// cocoonbox-agent verbs, real tmux and git, and the stand-in CLI of
// tests/offload/standin as claude and codex, on a temporary home,
// workspace, tmux server and socket. The booted-box tests (tests/offload)
// do the same inside a box with the image's own unit.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// TestMain removes what bins built (each run left its binaries in /tmp).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// bins builds cocoonbox-agent and the stand-in (as claude and codex) once.
func bins(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "cocoonbox-offload-bin-")
		if buildErr != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "../../..")
		for out, pkg := range map[string]string{"cocoonbox-agent": "./guest/cmd/cocoonbox-agent", "claude": "./tests/offload/standin"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, out), pkg)
			cmd.Dir = root
			if o, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{pkg, string(o)}
				return
			}
		}
		buildErr = os.Link(filepath.Join(binDir, "claude"), filepath.Join(binDir, "codex"))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type buildError struct{ pkg, out string }

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + e.out }

// env is one test's world.
type env struct {
	t     testing.TB
	dir   string
	home  string
	paths offload.Paths
	bin   string
	srv   *inbox.Server
	stop  context.CancelFunc
	done  chan error
	// handover, when set, is the hand-over macSide sends.
	handover string
}

// newEnv makes the world and starts the inbox. The tests of this file
// change the process environment, so they do not run in parallel.
func newEnv(t testing.TB) *env {
	t.Helper()
	for _, tool := range []string{"tmux", "git", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing on this host (make setup installs it): %v", tool, err)
		}
	}
	e := &env{t: t, dir: t.TempDir(), bin: bins(t)}
	e.home = filepath.Join(e.dir, "home")
	e.paths = offload.Paths{State: filepath.Join(e.home, ".local/share/cocoonbox/offload"),
		Secrets: filepath.Join(e.dir, "tmpfs/secrets"), Socket: filepath.Join(e.dir, "offload.sock"),
		Workspace: filepath.Join(e.dir, "workspace")}
	for _, d := range []string{e.home, e.paths.Workspace, filepath.Join(e.dir, "tmux")} {
		must(t, os.MkdirAll(d, 0o700))
	}
	// A login shell resets PATH from /etc/profile; the home's .profile
	// puts the test's binaries first again, as ~/.local/bin is in a box.
	vars := map[string]string{"HOME": e.home, "TMUX_TMPDIR": filepath.Join(e.dir, "tmux"),
		"COCOONBOX_OFFLOAD_STATE": e.paths.State, "COCOONBOX_OFFLOAD_SECRETS": e.paths.Secrets,
		"COCOONBOX_OFFLOAD_SOCKET": e.paths.Socket, "COCOONBOX_WORKSPACE": e.paths.Workspace,
		"PATH": e.bin + ":" + os.Getenv("PATH")}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	must(t, os.WriteFile(filepath.Join(e.home, ".profile"), []byte("export PATH="+e.bin+":$PATH\n"), 0o644))
	if mise := os.Getenv("COCOONBOX_TEST_MISE"); mise != "" {
		os.Symlink(mise, filepath.Join(e.bin, "mise"))
	}
	e.start()
	t.Cleanup(func() {
		e.kill()
		endTmux(t)
	})
	return e
}

// endTmux ends the test's tmux server and every process of its panes'
// sessions, and waits for them: the stand-in CLI in a pane may write into
// the state directory on its way out, after the server is gone, and
// TempDir's removal then failed ("offload/k4: directory not empty", once
// in a full make test under load).
func endTmux(t testing.TB) {
	out, _ := exec.Command("tmux", "list-panes", "-a", "-F", "#{pane_pid}").Output()
	sessions := map[int]bool{}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			sessions[pid] = true // a pane's process leads its session
		}
	}
	exec.Command("tmux", "kill-server").Run()
	if len(sessions) == 0 {
		return
	}
	err := wait.Until(10*time.Second, "the tmux panes' processes ended", func() (bool, string) {
		left := inSessions(sessions)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(left) == 0, fmt.Sprint(left)
	})
	if err != nil {
		t.Error(err)
	}
}

// inSessions answers the live processes whose session id is in sessions
// (zombies, already ended, are left out).
func inSessions(sessions map[int]bool) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...: comm may hold spaces.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 4 || f[0] == "Z" {
			continue
		}
		if sid, _ := strconv.Atoi(f[3]); sessions[sid] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// start runs an inbox on the socket, as serve does.
func (e *env) start() {
	ln, err := inbox.Listen(e.paths.Socket)
	must(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	e.srv = &inbox.Server{Store: offload.Store{Paths: e.paths}, Agent: filepath.Join(e.bin, "cocoonbox-agent"),
		Log: &journal.Logger{Identifier: "test-inbox", Fields: map[string]string{}, Stderr: &bytes.Buffer{}}}
	e.stop, e.done = cancel, make(chan error, 1)
	ready := make(chan struct{})
	go func() { e.done <- e.srv.Serve(ctx, ln, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-e.done:
		e.t.Fatalf("inbox did not start: %v", err)
	}
}

// kill stops the inbox (as a crash would, the records stay).
func (e *env) kill() {
	if e.stop != nil {
		e.stop()
		<-e.done
		e.stop = nil
	}
}

// verb runs cocoonbox-agent offload VERB and parses its one stdout line.
func (e *env) verb(stdin []byte, args ...string) (map[string]any, int, string) {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, "cocoonbox-agent"), append([]string{"offload"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	var resp map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &resp) != nil {
		e.t.Fatalf("offload %v: stdout is not one JSON line: %q (stderr %s)", args, out.String(), errb.String())
	}
	return resp, code, errb.String()
}

// mustVerb is verb that fails the test unless it exits 0.
func (e *env) mustVerb(stdin []byte, args ...string) map[string]any {
	e.t.Helper()
	resp, code, stderr := e.verb(stdin, args...)
	if code != 0 {
		e.t.Fatalf("offload %v exited %d: %v\nstderr: %s", args, code, resp, stderr)
	}
	return resp
}

// standin reads what the stand-in recorded.
func (e *env) standin(cli, name string) string {
	data, _ := os.ReadFile(filepath.Join(e.home, ".standin", cli+"-"+name))
	return string(data)
}

// messages is what the stand-in got as submitted messages.
func (e *env) messages(cli string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(e.standin(cli, "messages.jsonl")), "\n") {
		var m string
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// waitFor waits up to 30 s for cond (wait.Eventually).
func (e *env) waitFor(what string, cond func() (bool, string)) {
	e.t.Helper()
	wait.Eventually(e.t, 30*time.Second, what, cond)
}

// status is the repo's session status from the status verb.
func (e *env) status(key string) string {
	resp := e.mustVerb(nil, "status", "--repo", key)
	ss, _ := resp["sessions"].([]any)
	if len(ss) != 1 {
		return "none"
	}
	st, _ := ss[0].(map[string]any)["status"].(string)
	return st
}

// hold sends "standin: hold" to the repo's session and waits until the
// stand-in holds that turn. Waiting for the status working is not
// enough: the inbox says working from its own paste on, before the CLI
// has read the message, and that turn's prompt hook (UserPromptSubmit)
// may then still be on its way. Under load it came after a Stop the test
// reported next, inside the KeySettle before that Stop's delivery, and
// made the session working again, so the queued message waited for an
// idle that never came. The stand-in records holding after the prompt
// hook has been answered, so from then on the turn reports nothing until
// it is released.
func (e *env) hold(repo string) {
	e.t.Helper()
	holding := func() int { return strings.Count(e.standin("claude", "events.jsonl"), `"holding"`) }
	before := holding()
	e.mustVerb([]byte("standin: hold"), "send", "--repo", repo, "--message")
	e.waitFor("the CLI holding its turn", func() (bool, string) {
		n := holding()
		return n > before, fmt.Sprintf("%d holding events (%d before); status %s", n, before, e.status(repo))
	})
}

// waitParked waits until n read requests are parked in a long poll (the
// status op's parked).
func (e *env) waitParked(n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d parked reads", n), func() (bool, string) {
		resp, err := offload.Call(e.paths.Socket, &offload.Request{Op: "status"}, 10*time.Second)
		return err == nil && resp["parked"] == float64(n), fmt.Sprint(resp, err)
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The helpers the offload tests share (guest/offload/offloadtest).
var (
	git      = offloadtest.Git
	tarOf    = offloadtest.TarOf
	Handover = offloadtest.Handover
)
