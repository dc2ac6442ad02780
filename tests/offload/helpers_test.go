// Package offload holds the booted-box tests of the box side of an
// offload (issue 12; Contract: Offload): the image's inbox unit, socket
// and tmpfs, begin's preflight with the real claude and codex CLIs, a
// whole round with the stand-in CLI (./standin), crashes and reboots.
package offload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/offloadtest"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// CLIsEnv names the directory of the real CLIs' npm install (make setup
// puts it in the cache); a missing one fails the tests that need it.
const CLIsEnv = "COCOONBOX_OFFLOAD_CLIS"

func clisDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv(CLIsEnv)
	if d == "" {
		cache := os.Getenv("COCOONBOX_CACHE")
		if cache == "" {
			cache = "/var/cache/cocoonbox"
		}
		d = filepath.Join(cache, "npm/clis-2.1.197-0.171.0")
	}
	if _, err := os.Stat(filepath.Join(d, "node_modules/.bin/claude")); err != nil {
		t.Fatalf("the real claude and codex CLIs are not at %s (make setup installs them): %v", d, err)
	}
	return d
}

var (
	standinOnce sync.Once
	standinPath string
	standinErr  error
)

// standin builds the stand-in CLI (static, for the box) once.
func standin(t *testing.T) string {
	t.Helper()
	standinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cocoonbox-standin-")
		if err != nil {
			standinErr = err
			return
		}
		standinPath = filepath.Join(dir, "standin")
		cmd := exec.Command("go", "build", "-o", standinPath, "./standin")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			standinErr = fmt.Errorf("go build ./standin: %v: %s", err, out)
		}
	})
	if standinErr != nil {
		t.Fatal(standinErr)
	}
	return standinPath
}

// installStandin puts the stand-in at ~user/.local/bin/claude and codex,
// where a user's own install lands (on a login shell's PATH).
func installStandin(t *testing.T, b *box.Box) {
	t.Helper()
	b.MustSh(t, "install -d -o user -g user /home/user/.local /home/user/.local/bin")
	if err := b.CopyIn(standin(t), "/home/user/.local/bin/claude", 0o755, "user:user"); err != nil {
		t.Fatal(err)
	}
	b.MustSh(t, "ln -f /home/user/.local/bin/claude /home/user/.local/bin/codex")
}

// boot boots a box and waits for user's inbox to serve its socket.
func boot(t *testing.T, opts box.Options) *box.Box {
	t.Helper()
	b := box.Boot(t, opts)
	waitInbox(t, b)
	return b
}

func waitInbox(t *testing.T, b *box.Box) {
	t.Helper()
	waitFor(t, "the inbox's socket", func() (bool, string) {
		out, err := b.Sh("test -S /run/cocoonbox/offload.sock && " + userSystemctl + " is-active cocoonbox-offload-inbox.service")
		return err == nil, out
	})
}

// userSystemctl reaches user's manager from root.
const userSystemctl = "runuser -u user -- env XDG_RUNTIME_DIR=/run/user/1000 systemctl --user"

// verb runs cocoonbox-agent offload VERB in user's login shell and parses
// its one stdout line.
func verb(t *testing.T, b *box.Box, stdin []byte, args ...string) (map[string]any, int, string) {
	t.Helper()
	line := "cocoonbox-agent offload"
	for _, a := range args {
		line += " " + shellQuote(a)
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

func mustVerb(t *testing.T, b *box.Box, stdin []byte, args ...string) map[string]any {
	t.Helper()
	resp, code, stderr := verb(t, b, stdin, args...)
	if code != 0 {
		t.Fatalf("offload %v exited %d: %v\nstderr: %s", args, code, resp, stderr)
	}
	return resp
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// waitFor waits up to 60 s for cond (box.Eventually).
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	box.Eventually(t, 60*time.Second, what, cond)
}

func status(t *testing.T, b *box.Box, key string) string {
	t.Helper()
	resp := mustVerb(t, b, nil, "status", "--repo", key)
	ss, _ := resp["sessions"].([]any)
	if len(ss) != 1 {
		return "none"
	}
	s, _ := ss[0].(map[string]any)["status"].(string)
	return s
}

// The helpers the offload tests share (internal/offloadtest).
var (
	git      = offloadtest.Git
	tarOf    = offloadtest.TarOf
	handover = offloadtest.Handover
)

// macRepo makes a host repository with two commits and an uncommitted
// change.
func macRepo(t *testing.T) string {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("target/\n.env\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644)
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two\n"), 0o644)
	git(t, dir, "commit", "-q", "-am", "two")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two, uncommitted\n"), 0o644)
	return dir
}

// macSide does the host packer's half (Contract: Offload, Mac side)
// against the box: begin, S, rsync into the box's /workspace/<name>
// without .git/objects, the bundle, the stream, send.
func macSide(t *testing.T, b *box.Box, host, key, name, kind, id string, extra ...[2]string) (map[string]any, int) {
	t.Helper()
	mustVerb(t, b, nil, "begin", "--repo", key, "--name", name, "--kind", kind, "--id", id)
	cmd := exec.Command("sh", "-c", `i=$(mktemp) && cp .git/index "$i" && GIT_INDEX_FILE="$i" git add -A && GIT_INDEX_FILE="$i" git write-tree; rm -f "$i"`)
	cmd.Dir = host
	tree, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	s := git(t, host, "commit-tree", strings.TrimSpace(string(tree)), "-p", "HEAD", "-m", "S")
	git(t, host, "update-ref", "refs/cocoonbox/base/"+id, s)
	// rsync over a remote shell into the box, as `cocoonbox rsh` is for the
	// Mac: the receiving rsync runs in the box as user.
	rsh := filepath.Join(t.TempDir(), "box-rsh")
	os.WriteFile(rsh, []byte(fmt.Sprintf("#!/bin/sh\nshift\nexec nsenter -t %d -a -- runuser -u user -- \"$@\"\n", b.Leader())), 0o755)
	out, err := exec.Command("rsync", "-az", "--delete", "--exclude=/.git/objects/", "-e", rsh,
		host+"/", "box:/workspace/"+name+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("rsync into the box: %v: %s", err, out)
	}
	bundle := filepath.Join(t.TempDir(), "offload.bundle")
	git(t, host, "bundle", "create", bundle, "--all")
	data, _ := os.ReadFile(bundle)
	members := append([][2]string{{"handover.md", handover("a box task")},
		{"env.json", `{"v":1,"tools":{},"package_managers":{},"files":[],"lockfiles":[]}`},
		{"offload.bundle", string(data)}}, extra...)
	resp, code, stderr := verb(t, b, tarOf(t, members...), "send", "--repo", key, "--kind", kind, "--id", id)
	if code != 0 {
		t.Logf("send exited %d: %v\nstderr: %s", code, resp, stderr)
	}
	return resp, code
}

func messages(t *testing.T, b *box.Box, cli string) []string {
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
