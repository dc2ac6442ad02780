//go:build booted

package session_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Must show: a 100 MiB stream through stdin and back is byte-identical.
func TestRshStdinThroughAndBackIsByteIdentical(t *testing.T) {
	data := make([]byte, 100<<20)
	_, _ = rand.Read(data)
	cmd := rsh(context.Background(), nil, "--box", "dev", "--", "cat")
	cmd.Stdin = bytes.NewReader(data)
	h := sha256.New()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = h, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rsh cat: %v: %s", err, stderr.String())
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("100 MiB came back as %x, want %x", h.Sum(nil), want)
	}
}

// Must show: exit statuses 0, 1 and 130 come back as rsh's; stdout and
// stderr stay apart.
func TestRshExitStatusesAndStreams(t *testing.T) {
	for line, want := range map[string]int{"true": 0, "false": 1, "exit 130": 130, "kill -INT $$": 130, "exit 7": 7} {
		out, err := rsh(context.Background(), nil, "--", line).CombinedOutput()
		if got := exitCode(err); got != want {
			t.Errorf("rsh -- %q: exit %d (%v: %s), want %d", line, got, err, out, want)
		}
	}
	cmd := rsh(context.Background(), nil, "--", "echo out; echo err >&2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q, %v", stdout.String(), stderr.String(), err)
	}
}

// The command runs as user in a login shell: user's home, a login
// shell's $0, and the profile's PATH.
func TestRshRunsAsUserInALoginShell(t *testing.T) {
	out, err := rsh(context.Background(), nil, "--", `id -un; echo "$HOME"; pwd; echo "$0"`).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 || lines[0] != "user" || lines[1] != "/home/user" || lines[2] != "/home/user" || !strings.HasPrefix(lines[3], "-") {
		t.Fatalf("id, HOME, pwd, $0: %q", lines)
	}
}

// Must show: a command that prints nothing for longer than every idle and
// keepalive clock on its path (the api's idle timeout and HTTP/2 pings,
// rsh's pings, all at clock here) and then a megabyte is neither cut off
// nor stalled (e2b #1074, #1352).
func TestRshSilenceLongerThanEveryClockThenAMegabyte(t *testing.T) {
	silence := 6 * clock
	cmd := rsh(context.Background(), nil, "--", fmt.Sprintf("sleep %g; head -c 1048576 /dev/urandom", silence.Seconds()))
	out, err := cmd.Output()
	if err != nil || len(out) != 1<<20 {
		t.Fatalf("after %v of silence (clocks at %v): %d bytes, %v", silence, clock, len(out), err)
	}
}

// A slow reader holds the command, not the api's memory: with nobody
// reading, the command's writes block once the windows and pipes on the
// path are full, far below what it means to write.
func TestSlowReaderBlocksTheCommandNotTheAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := client(aliceToken).Exec(ctx)
	if err := s.Send(start(&controlv1.SessionExecStart{Command: []string{
		"rm -f /tmp/written; n=0; while [ $n -lt 400 ]; do head -c 1048576 /dev/zero || exit; n=$((n+1)); echo $n >/tmp/written; done"}})); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Receive(); err != nil || !m.GetStarted() {
		t.Fatalf("started: %v %v", m, err)
	}
	// Blocked: the writer sleeps in pipe_write and the count stays put.
	var written, wchan string
	wait.Eventually(t, time.Minute, "the command blocked on its full output", func() (bool, string) {
		before := strings.TrimSpace(inBox(t, "cat /tmp/written 2>/dev/null || echo 0"))
		wchan = inBox(t, `for p in $(pgrep -u user -x head); do cat /proc/$p/wchan; echo; done`)
		written = strings.TrimSpace(inBox(t, "cat /tmp/written 2>/dev/null || echo 0"))
		return strings.Contains(wchan, "pipe_write") && before == written, fmt.Sprintf("wchan %q, %s MiB written", wchan, written)
	})
	// The path holds rsh's and the api's HTTP/2 windows (16 MiB each), a
	// chunk in each pump and the pipes: far under the 400 MiB it writes.
	if n := atoi(written); n > 64 {
		t.Fatalf("%d MiB written with nobody reading: the path buffers without bound", n)
	}
	var got int
	for {
		m, err := s.Receive()
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += len(m.GetStdout())
		if m.GetExit() != nil {
			if got != 400<<20 || m.GetExit().GetCode() != 0 {
				t.Fatalf("read %d bytes, exit %v", got, m.GetExit())
			}
			break
		}
	}
	t.Logf("blocked at %s MiB written", written)
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func start(st *controlv1.SessionExecStart) *controlv1.SessionExecRequest {
	return &controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Start{Start: st}}
}

// Must show: rsync -e "cocoonbox rsh --box B" both ways against the box.
func TestRsyncOverRsh(t *testing.T) {
	src := t.TempDir()
	for _, f := range []string{"a.txt", "dir/b.bin", "dir/deeper/c"} {
		p := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 1<<16+len(f))
		_, _ = rand.Read(data)
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	e := bins.CLI + " rsh --box dev"
	env := append(os.Environ(), "COCOONBOX_ENDPOINT="+endpoint, "COCOONBOX_TOKEN="+aliceToken, "XDG_CONFIG_HOME="+testRoot)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("rsync", append([]string{"-a", "--delete", "-e", e}, args...)...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rsync %q: %v: %s", args, err, out)
		}
	}
	run(src+"/", "box:/home/user/rsynced/")
	if got := inBox(t, "cd /home/user/rsynced && stat -c '%U %a %n' a.txt dir/b.bin && readlink link"); got != "user 640 a.txt\nuser 640 dir/b.bin\na.txt\n" {
		t.Errorf("in the box: %q", got)
	}
	back := t.TempDir()
	run("box:/home/user/rsynced/", back+"/")
	if out, err := exec.Command("diff", "-r", "--no-dereference", src, back).CombinedOutput(); err != nil {
		t.Fatalf("the tree that came back differs: %v: %s", err, out)
	}
}

// Must show: git clone (and push) over rsh, with GIT_SSH_COMMAND and
// GIT_SSH_VARIANT=simple, against a repository in the box.
func TestGitCloneAndPushOverRsh(t *testing.T) {
	head := strings.TrimSpace(inBox(t, `runuser -l user -c 'rm -rf repo && git init -q -b main repo && cd repo && echo hello >README &&
		git add README && git -c user.email=u@box -c user.name=u commit -qm first && git rev-parse HEAD'`))
	dir := t.TempDir()
	env := append(os.Environ(), "COCOONBOX_ENDPOINT="+endpoint, "COCOONBOX_TOKEN="+aliceToken, "XDG_CONFIG_HOME="+testRoot,
		"GIT_SSH_COMMAND="+bins.CLI+" rsh --box dev", "GIT_SSH_VARIANT=simple")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env, cmd.Dir = env, dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("clone", "-q", "box:/home/user/repo", "clone")
	dir = filepath.Join(dir, "clone")
	if got := git("rev-parse", "HEAD"); got != head {
		t.Fatalf("cloned HEAD %s, want %s", got, head)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "README")); err != nil || string(data) != "hello\n" {
		t.Fatalf("README: %q %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "new")
	git("-c", "user.email=h@host", "-c", "user.name=h", "commit", "-qm", "second")
	mine := git("rev-parse", "HEAD")
	git("push", "-q", "origin", "HEAD:refs/heads/from-host")
	if got := strings.TrimSpace(inBox(t, "runuser -u user -- git -C /home/user/repo rev-parse from-host")); got != mine {
		t.Fatalf("pushed %s, the box has %s", mine, got)
	}
}

// Bad input: each a clear error naming the rule, nothing run; another
// user's box is not found, a box not running refused; rsh's exit codes for
// them.
func TestBadInputIsRefusedNamingTheRule(t *testing.T) {
	inBox(t, "rm -f /tmp/ran")
	touch := []string{"touch /tmp/ran"}
	refused := func(name, token string, st *controlv1.SessionExecStart, code connect.Code, want string) {
		t.Helper()
		s := client(token).Exec(context.Background())
		_ = s.Send(start(st))
		m, err := s.Receive()
		if connect.CodeOf(err) != code || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v %v, want %v naming %q", name, m, err, code, want)
		}
		_ = s.CloseRequest()
	}
	for _, c := range []struct {
		name  string
		token string
		start *controlv1.SessionExecStart
		code  connect.Code
		want  string
	}{
		{"empty command", aliceToken, &controlv1.SessionExecStart{}, connect.CodeInvalidArgument, "start.command: empty"},
		{"blank command", aliceToken, &controlv1.SessionExecStart{Command: []string{" ", ""}}, connect.CodeInvalidArgument, "start.command: empty"},
		{"tty of zero rows", aliceToken, &controlv1.SessionExecStart{Command: touch, Tty: &controlv1.TerminalSize{Rows: 0, Cols: 80}}, connect.CodeInvalidArgument, "start.tty: rows 0 and cols 80 must each be 1 to 65535"},
		{"tty of zero cols", aliceToken, &controlv1.SessionExecStart{Command: touch, Tty: &controlv1.TerminalSize{Rows: 24}}, connect.CodeInvalidArgument, "start.tty:"},
		{"a TERM that is no terminfo name", aliceToken, &controlv1.SessionExecStart{Command: touch, Tty: &controlv1.TerminalSize{Rows: 24, Cols: 80}, Term: "../x"}, connect.CodeInvalidArgument, "start.term:"},
		{"a TERM without a tty", aliceToken, &controlv1.SessionExecStart{Command: touch, Term: "xterm"}, connect.CodeInvalidArgument, "start.term: a TERM without a tty"},
		{"another user's box by name", bobToken, &controlv1.SessionExecStart{Box: "dev", Command: touch}, connect.CodeNotFound, "no such box"},
		{"another user's box by id", bobToken, &controlv1.SessionExecStart{Box: box, Command: touch}, connect.CodeNotFound, "no such box"},
		{"no box at all", bobToken, &controlv1.SessionExecStart{Command: touch}, connect.CodeNotFound, "no such box"},
		{"a box name of another grammar", aliceToken, &controlv1.SessionExecStart{Box: "Not A Name", Command: touch}, connect.CodeInvalidArgument, "box"},
		{"no token", "", &controlv1.SessionExecStart{Command: touch}, connect.CodeUnauthenticated, "Bearer"},
	} {
		refused(c.name, c.token, c.start, c.code, c.want)
	}
	env := []string{"COCOONBOX_TOKEN=" + bobToken}
	if out, err := rsh(context.Background(), env, "--box", "dev", "--", "touch /tmp/ran").CombinedOutput(); exitCode(err) != 66 || !strings.Contains(string(out), "no such box") {
		t.Errorf("rsh into another user's box: exit %d: %s, want 66 naming it", exitCode(err), out)
	}
	// A box not running: hibernated, then woken for the tests after.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	boxes := harness.Boxes(endpoint, aliceToken)
	if _, err := boxes.Hibernate(ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: "hibernate-dev", Box: "dev"})); err != nil {
		t.Fatal(err)
	}
	if err := waitState(ctx, controlv1.BoxState_BOX_STATE_HIBERNATED); err != nil {
		t.Fatal(err)
	}
	refused("a box not running", aliceToken, &controlv1.SessionExecStart{Box: "dev", Command: touch}, connect.CodeFailedPrecondition, "box dev is hibernated")
	if out, err := rsh(context.Background(), nil, "--", "touch /tmp/ran").CombinedOutput(); exitCode(err) != 69 || !strings.Contains(string(out), "wake it first") {
		t.Errorf("rsh into a hibernated box: exit %d: %s, want 69 saying to wake it", exitCode(err), out)
	}
	if _, err := boxes.Ensure(ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: "ensure-dev", Box: "dev"})); err != nil {
		t.Fatal(err)
	}
	if err := waitState(ctx, controlv1.BoxState_BOX_STATE_RUNNING); err != nil {
		t.Fatal(err)
	}
	if out := inBox(t, "ls /tmp/ran 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Errorf("a refused start ran its command: %s", out)
	}
	for _, c := range []struct {
		name string
		msgs []*controlv1.SessionExecRequest
		want string
	}{
		{"a resize of zero cols", []*controlv1.SessionExecRequest{{Msg: &controlv1.SessionExecRequest_Resize{Resize: &controlv1.TerminalSize{Rows: 30}}}}, "resize: rows 30 and cols 0 must each be 1 to 65535"},
		{"a second start", []*controlv1.SessionExecRequest{start(&controlv1.SessionExecStart{Command: touch})}, "start: a second start"},
	} {
		s := client(aliceToken).Exec(context.Background())
		_ = s.Send(start(&controlv1.SessionExecStart{Command: []string{"cat"}, Tty: &controlv1.TerminalSize{Rows: 24, Cols: 80}}))
		if m, err := s.Receive(); err != nil || !m.GetStarted() {
			t.Fatalf("%s: started: %v %v", c.name, m, err)
		}
		for _, m := range c.msgs {
			_ = s.Send(m)
		}
		err := drain(s)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT naming %q", c.name, err, c.want)
		}
	}
	s := client(aliceToken).Exec(context.Background())
	_ = s.Send(start(&controlv1.SessionExecStart{Command: []string{"cat"}}))
	_, _ = s.Receive()
	_ = s.Send(&controlv1.SessionExecRequest{Msg: &controlv1.SessionExecRequest_Resize{Resize: &controlv1.TerminalSize{Rows: 30, Cols: 90}}})
	if err := drain(s); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "resize: the command has no terminal") {
		t.Errorf("a resize without a tty: %v", err)
	}
}

// drain reads a stream to its end and answers its error (nil after exit).
func drain(s *connect.BidiStreamForClient[controlv1.SessionExecRequest, controlv1.SessionExecResponse]) error {
	for {
		m, err := s.Receive()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.GetExit() != nil {
			return nil
		}
	}
}

// The exec log line named the command's first word, so a command quoted
// as one word (`rsh -- 'GH_TOKEN=ghp_… gh pr list'`) put the token in the
// api's log. Now the line says how many words and bytes, none of the text.
func TestTheExecLogLineHoldsNothingOfTheCommand(t *testing.T) {
	secret := "ghp_" + strings.Repeat("x", 8) + rand.Text()
	before := strings.Count(api.Log(), "msg=exec")
	if out, err := rsh(context.Background(), nil, "--", "GH_TOKEN="+secret+" true").CombinedOutput(); err != nil {
		t.Fatalf("rsh: %v: %s", err, out)
	}
	wait.Eventually(t, time.Minute, "the exec line in the api's log", func() (bool, string) {
		return strings.Count(api.Log(), "msg=exec") > before, "no new exec line"
	})
	log := api.Log()
	if strings.Contains(log, secret) || strings.Contains(log, "GH_TOKEN") {
		t.Fatalf("the api's log holds the command's text:\n%s", log)
	}
	if !strings.Contains(log, "argc=1") || !strings.Contains(log, fmt.Sprintf("command_bytes=%d", len("GH_TOKEN="+secret+" true"))) {
		t.Fatalf("the exec line lacks argc and command_bytes:\n%s", log)
	}
}
