// Package offloadbox is what the booted-box tests of an offload share
// (tests/offload, the box side's and the host packer's; api/e2e/offload;
// the demo): a
// box with its inbox up, the stand-in CLI (tests/offload/standin)
// installed as claude and codex, the box verbs run as user, and the
// stand-in transport into the box that rsync and git take as their remote
// shell (nsenter into the box, then user's login shell), which takes the
// place of `cocoonbox rsh` where no api runs. Only tests import it.
package offloadbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// UserSystemctl reaches user's manager from root.
const UserSystemctl = "runuser -u user -- env XDG_RUNTIME_DIR=/run/user/1000 systemctl --user"

var (
	standinOnce sync.Once
	standinPath string
	standinErr  error
)

// BuildStandin builds the stand-in CLI (static, for the box) once per
// process and returns its path. Every process puts it at one path, renamed
// into place whole (a reader keeps the file it opened), so test runs leave
// one file behind, not one directory each.
func BuildStandin() (string, error) {
	standinOnce.Do(func() {
		root, err := box.RepoRoot()
		if err != nil {
			standinErr = err
			return
		}
		dir := filepath.Join(os.TempDir(), "cocoonbox-standin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			standinErr = err
			return
		}
		standinPath = filepath.Join(dir, "standin")
		tmp := fmt.Sprintf("%s.%d", standinPath, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "./tests/offload/standin")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			standinErr = fmt.Errorf("go build ./tests/offload/standin: %v: %s", err, out)
			return
		}
		standinErr = os.Rename(tmp, standinPath)
	})
	return standinPath, standinErr
}

// PutStandin puts the stand-in at ~user/.local/bin/claude and codex,
// where a user's own install lands (on a login shell's PATH).
func PutStandin(b *box.Box) error {
	path, err := BuildStandin()
	if err != nil {
		return err
	}
	if _, err := b.Sh("install -d -o user -g user /home/user/.local /home/user/.local/bin"); err != nil {
		return err
	}
	if err := b.CopyIn(path, "/home/user/.local/bin/claude", 0o755, "user:user"); err != nil {
		return err
	}
	_, err = b.Sh("ln -f /home/user/.local/bin/claude /home/user/.local/bin/codex")
	return err
}

// InstallStandin is PutStandin failing the test on an error.
func InstallStandin(t testing.TB, b *box.Box) {
	t.Helper()
	if err := PutStandin(b); err != nil {
		t.Fatal(err)
	}
}

// Boot boots a box and waits for user's inbox to serve its socket.
func Boot(t testing.TB, opts box.Options) *box.Box {
	t.Helper()
	b := box.Boot(t, opts)
	WaitInbox(t, b)
	return b
}

// WaitInbox waits up to 60 s for the inbox's socket and unit.
func WaitInbox(t testing.TB, b *box.Box) {
	t.Helper()
	box.Eventually(t, 60*time.Second, "the inbox's socket", func() (bool, string) {
		out, err := b.Sh("test -S /run/cocoonbox/offload.sock && " + UserSystemctl + " is-active cocoonbox-offload-inbox.service")
		return err == nil, out
	})
}

// Verb runs cocoonbox-agent offload ARGS in user's login shell and parses
// its one stdout line; it returns the line, the exit status and stderr.
func Verb(t testing.TB, b *box.Box, stdin []byte, args ...string) (map[string]any, int, string) {
	t.Helper()
	line := "cocoonbox-agent offload"
	for _, a := range args {
		line += " " + packer.ShellQuote(a)
	}
	res, err := b.Exec(box.Cmd{User: "user", Login: true, Args: []string{line}, Stdin: bytes.NewReader(stdin), Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var resp map[string]any
	lines := strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n")
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &resp) != nil {
		t.Fatalf("offload %v: stdout is not one JSON line: %q (stderr %s)", args, res.Stdout, res.Stderr)
	}
	return resp, res.ExitCode, res.Stderr
}

// MustVerb is Verb failing the test on a non-zero exit.
func MustVerb(t testing.TB, b *box.Box, stdin []byte, args ...string) map[string]any {
	t.Helper()
	resp, code, stderr := Verb(t, b, stdin, args...)
	if code != 0 {
		t.Fatalf("offload %v exited %d: %v\nstderr: %s", args, code, resp, stderr)
	}
	return resp
}

// Status is the repo's one session's status, or "none".
func Status(t testing.TB, b *box.Box, key string) string {
	t.Helper()
	resp := MustVerb(t, b, nil, "status", "--repo", key)
	ss, _ := resp["sessions"].([]any)
	if len(ss) != 1 {
		return "none"
	}
	s, _ := ss[0].(map[string]any)["status"].(string)
	return s
}

// Messages are the messages the stand-in of cli submitted, in order.
func Messages(t testing.TB, b *box.Box, cli string) []string {
	out, _ := b.Sh("cat /home/user/.standin/" + cli + "-messages.jsonl 2>/dev/null")
	var ms []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m string
		if json.Unmarshal([]byte(l), &m) == nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// Transport is the stand-in transport into b (a packer.Transport): a
// remote-shell script taking ssh's convention (a host word, then words
// joined into one shell line) that enters the box with nsenter and runs
// the line in user's login shell, as `cocoonbox rsh` runs it through
// Session.Exec.
type Transport struct{ script string }

// NewTransport writes the script for b into a test directory.
func NewTransport(t testing.TB, b *box.Box) Transport {
	t.Helper()
	tr, err := WriteTransport(t.TempDir(), b)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// WriteTransport writes the script for b into dir.
func WriteTransport(dir string, b *box.Box) (Transport, error) {
	script := filepath.Join(dir, "box-rsh")
	body := fmt.Sprintf("#!/bin/sh\n# box-rsh HOST WORDS...: the words are one shell line, run as user in box %s\nshift\nexec nsenter -t %d -a -- runuser -l user -c \"$*\"\n", b.Name, b.Leader())
	return Transport{script: script}, os.WriteFile(script, []byte(body), 0o755)
}

// Command runs argv in the box as user (packer.Transport).
func (tr Transport) Command(ctx context.Context, argv ...string) *exec.Cmd {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = packer.ShellQuote(a)
	}
	return exec.CommandContext(ctx, tr.script, "box", strings.Join(words, " "))
}

// Shell is the script, for rsync -e and GIT_SSH_COMMAND (packer.Transport).
func (tr Transport) Shell() string { return packer.ShellQuote(tr.script) }

// Script is the transport's remote-shell script, for a child process to
// take with TransportAt.
func (tr Transport) Script() string { return tr.script }

// TransportAt is the transport of a script NewTransport wrote.
func TransportAt(script string) Transport { return Transport{script: script} }

// Dropping is the stand-in transport with one answer lost (issue 22,
// Deliver 4): the first command whose argv Drop matches runs in the box
// to its end, as the box acts on it, but its stdout never reaches the
// host and its exit status is 255, as `cocoonbox rsh` and ssh exit when
// the connection drops. Every other command, rsync's and git's remote
// shell included, goes through as Transport runs it.
type Dropping struct {
	Transport
	// Drop picks the command whose answer is lost.
	Drop func(argv []string) bool
	// Dropped says whether it was.
	Dropped *atomic.Bool
}

// NewDropping is tr dropping the answer of the first command drop picks.
func NewDropping(tr Transport, drop func(argv []string) bool) Dropping {
	return Dropping{Transport: tr, Drop: drop, Dropped: &atomic.Bool{}}
}

// Command runs argv in the box (packer.Transport), losing the answer
// once.
func (d Dropping) Command(ctx context.Context, argv ...string) *exec.Cmd {
	if !d.Drop(argv) || !d.Dropped.CompareAndSwap(false, true) {
		return d.Transport.Command(ctx, argv...)
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = packer.ShellQuote(a)
	}
	return exec.CommandContext(ctx, "sh", "-c", `"$0" box "$1" >/dev/null 2>&1; exit 255`, d.script, strings.Join(words, " "))
}

// VerbArgs is a Drop that picks the box verb `cocoonbox-agent offload VERB`
// whose arguments include every one of with.
func VerbArgs(verb string, with ...string) func(argv []string) bool {
	return func(argv []string) bool {
		if len(argv) < 3 || argv[0] != "cocoonbox-agent" || argv[2] != verb {
			return false
		}
		for _, w := range with {
			found := false
			for _, a := range argv[3:] {
				found = found || a == w
			}
			if !found {
				return false
			}
		}
		return true
	}
}
