//go:build booted

package offload

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/clis"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Offload, Inbox: the inbox runs as a user unit of user, and
// its socket is user:cbagent 0660 in /run/cocoonbox. That directory stays
// 2750, the Tool host line's mode, not the 2770 of the Offload line: the
// setgid bit alone gives the socket group cbagent, and without write on
// the directory cbagent cannot remove or replace the socket (or plant one
// of its own). cbagent can connect; nobody else can.
func TestInboxSocketCbagentConnectsNobodyElse(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{})
	if got := strings.TrimSpace(b.Must(t, "stat", "-c", "%a %U:%G %F", "/run/cocoonbox/offload.sock")); got != "660 user:cbagent socket" {
		t.Errorf("socket: %q, want 660 user:cbagent socket", got)
	}
	if got := strings.TrimSpace(b.Must(t, "stat", "-c", "%a %U:%G", "/run/cocoonbox")); got != "2750 user:cbagent" {
		t.Errorf("/run/cocoonbox: %q, want 2750 user:cbagent", got)
	}
	// cbagent: the status op answers (the agent's offload status).
	res, err := b.Exec(box.Cmd{User: "cbagent", Args: []string{"/usr/local/bin/cocoonbox-agent", "offload", "status"}})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, `"ok":true`) {
		t.Errorf("cbagent's status: %v exit %d %q %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	// nobody: connect is refused, so the verb says the inbox is not there.
	res, err = b.Exec(box.Cmd{User: "nobody", Args: []string{"/usr/local/bin/cocoonbox-agent", "offload", "status"}})
	if err != nil || res.ExitCode != 4 || !strings.Contains(res.Stdout, "permission denied") {
		t.Errorf("nobody's status: %v exit %d %q", err, res.ExitCode, res.Stdout)
	}
	// cbagent cannot remove or replace the socket.
	if res, _ := b.Exec(box.Cmd{User: "cbagent", Args: []string{"rm", "-f", "/run/cocoonbox/offload.sock"}}); res.ExitCode == 0 {
		t.Error("cbagent removed the inbox's socket")
	}
}

// Contract: Offload, Directories: the secrets tmpfs at
// /run/cocoonbox-offload, 64 MiB, user 0700; and the image's tools on a
// login shell's PATH (git, rsync, tmux, mise; build-essential; node for
// codex) and the box packer at /usr/local/bin/cocoonbox-agent.
func TestImageCarriesTheOffloadTools(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{})
	if got := strings.Join(strings.Fields(b.Must(t, "findmnt", "-n", "-o", "FSTYPE,SIZE", "/run/cocoonbox-offload")), " "); got != "tmpfs 64M" {
		t.Errorf("/run/cocoonbox-offload: %q, want tmpfs 64M", got)
	}
	if got := strings.TrimSpace(b.Must(t, "stat", "-c", "%a %U:%G", "/run/cocoonbox-offload")); got != "700 user:user" {
		t.Errorf("/run/cocoonbox-offload: %q, want 700 user:user", got)
	}
	res, err := b.Exec(box.Cmd{User: "user", Login: true, Args: []string{"for t in git rsync tmux mise make gcc node npm tic cocoonbox-agent; do command -v $t || echo MISSING $t; done; mise --version"}})
	if err != nil || strings.Contains(res.Stdout, "MISSING") || !strings.Contains(res.Stdout, "2026.9.15") {
		t.Errorf("tools on user's login PATH: %v %s %s", err, res.Stdout, res.Stderr)
	}
	if v := b.Must(t, "cocoonbox-agent", "--version"); !strings.HasPrefix(v, "cocoonbox-agent ") {
		t.Errorf("--version: %q", v)
	}
	for _, sub := range []string{"serve", "toolhost-service"} {
		if res, _ := b.Exec(box.Cmd{Args: []string{"cocoonbox-agent", sub}}); res.ExitCode != 2 || !strings.Contains(res.Stderr, "shuttle") {
			t.Errorf("cocoonbox-agent %s: exit %d %q, want 2 naming shuttle", sub, res.ExitCode, res.Stderr)
		}
	}
	out, err := b.Sh("systemd-analyze verify /usr/lib/systemd/user/cocoonbox-offload-inbox.service '/usr/lib/systemd/system/run-cocoonbox\\x2doffload.mount' 2>&1")
	if err != nil || strings.Contains(out, "cocoonbox") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// Contract: Offload, Preflight, "Box CLI missing or signed out", with the
// real CLIs from npm in user's home: installed and signed out blocks with
// "Sign in in the box"; absent blocks with "Install in box"; both with
// the contract's JSON (code refused, findings, cli) and exit 3.
func TestPreflightRealCLIs(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{Args: []string{"--bind-ro=" + clis.Dir(t) + ":/opt/offload-clis"}})
	for _, kind := range []string{"claude", "codex"} {
		resp, code, _ := verb(t, b, nil, "begin", "--repo", "pre-"+kind, "--name", "pre-"+kind, "--kind", kind, "--id", "o1")
		if code != 3 || resp["code"] != "refused" || !strings.Contains(resp["error"].(string), "Install in box") {
			t.Errorf("%s absent: exit %d %v", kind, code, resp)
		}
		checkFindings(t, kind, resp, "Install in box")
	}
	b.MustSh(t, "install -d -o user -g user /home/user/.local/bin && "+
		"ln -s /opt/offload-clis/node_modules/.bin/claude /home/user/.local/bin/claude && "+
		"ln -s /opt/offload-clis/node_modules/.bin/codex /home/user/.local/bin/codex && chown -h user:user /home/user/.local/bin/*")
	for kind, version := range map[string]string{"claude": "2.1.197", "codex": "0.171.0"} {
		resp, code, _ := verb(t, b, nil, "begin", "--repo", "pre-"+kind, "--name", "pre-"+kind, "--kind", kind, "--id", "o1")
		if code != 3 || resp["code"] != "refused" || !strings.Contains(resp["error"].(string), "Sign in in the box") {
			t.Errorf("%s signed out: exit %d %v", kind, code, resp)
		}
		cli, _ := resp["cli"].(map[string]any)
		if cli["kind"] != kind || cli["version"] != version || cli["signed_in"] != false {
			t.Errorf("%s cli: %v, want version %s signed out", kind, cli, version)
		}
		checkFindings(t, kind, resp, "Sign in in the box")
	}
	// Nothing changed: no copy was taken.
	if out, _ := b.Sh("ls /workspace"); strings.TrimSpace(out) != "" {
		t.Errorf("a refused begin made %q", out)
	}
}

func checkFindings(t *testing.T, kind string, resp map[string]any, detail string) {
	t.Helper()
	fs, _ := resp["findings"].([]any)
	for _, f := range fs {
		m := f.(map[string]any)
		if m["check"] == "Box CLI missing or signed out" && m["outcome"] == "block" && strings.Contains(m["detail"].(string), detail) {
			return
		}
	}
	t.Errorf("%s: findings %v lack the block %q", kind, fs, detail)
}
