//go:build booted

package controlmcp

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/internal/clis"
)

// The snippet `cocoonbox mcp` prints works in the real CLIs: claude runs
// its `claude mcp add` line and reaches the api's control MCP with the
// token (claude mcp get checks the server: Connected), codex reads its
// config.toml entry as a streamable HTTP server with the bearer. A
// revoked token is the control case: claude can no longer connect.
func TestSnippetWorksInClaudeAndCodex(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir(), Env: []string{"COCOONBOX_TOKEN=" + h.alice}}
	out, err := cli.Run(ctx, "", "mcp", "--with-token", "--endpoint", h.api.URL)
	if err != nil {
		t.Fatalf("cocoonbox mcp: %v\n%s", err, out)
	}
	c := newCLIsHome(t, ctx)
	sh := c.sh
	add := line(t, out, "claude mcp add ", "--header")
	if b, err := sh(add); err != nil {
		t.Fatalf("%s: %v\n%s", add, err, b)
	}
	got, err := sh("claude mcp get cocoonbox")
	if err != nil || !strings.Contains(got, "Connected") || !strings.Contains(got, h.mcpURL) {
		t.Fatalf("claude mcp get cocoonbox after the snippet: %v\n%s", err, got)
	}

	codexHome := filepath.Join(c.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	toml := out[strings.LastIndex(out, "[mcp_servers.cocoonbox]"):] // the token form is the last
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = sh("codex mcp get cocoonbox --json")
	for _, want := range []string{`"type": "streamable_http"`, `"url": "` + h.mcpURL + `"`, `"Authorization": "Bearer ` + h.alice + `"`} {
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("codex mcp get cocoonbox: %v, want %s in\n%s", err, want, got)
		}
	}

	id := line(t, mustRun(t, ctx, cli, "devices", "--endpoint", h.api.URL), "* ", "")
	mustRun(t, ctx, cli, "devices", "revoke", strings.Fields(id)[1], "--endpoint", h.api.URL)
	if got, _ := sh("claude mcp get cocoonbox"); strings.Contains(got, "Connected") {
		t.Fatalf("claude still connects with the revoked token:\n%s", got)
	}
}

// The OAuth form `cocoonbox mcp` prints (the URL alone) in the real
// CLIs, which run without their services: claude's add line, then claude
// mcp list sees the control MCP as needing authentication rather than
// failing to connect; codex mcp add takes the URL as a streamable HTTP
// server, finds the api's OAuth from the MCP's 401 and the two metadata
// documents and starts its sign-in at this api's consent page (S256, scope
// boxes, the control MCP as resource, a loopback redirect), with its
// Client ID Metadata Document, and with --oauth-client-registration dcr
// registers itself here; codex mcp list then says it is not logged in
// (for a server without OAuth it says Unsupported).
//
// Contract: OAuth for agents (MCP authorization 2025-11-25); issue 27,
// Deliver 8 and Must show.
func TestOAuthSnippetInClaudeAndCodex(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir()}
	out, err := cli.Run(ctx, "", "mcp", "--endpoint", h.api.URL) // signed out: the OAuth forms need no token
	if err != nil {
		t.Fatalf("cocoonbox mcp: %v\n%s", err, out)
	}
	c := newCLIsHome(t, ctx)
	sh := c.sh

	add := line(t, out, "claude mcp add ", "")
	if strings.Contains(add, "--header") || !strings.HasSuffix(add, "'"+h.mcpURL+"'") {
		t.Fatalf("the OAuth form is not the URL alone: %s", add)
	}
	if b, err := sh(add); err != nil {
		t.Fatalf("%s: %v\n%s", add, err, b)
	}
	got, err := sh("claude mcp list")
	if err != nil || !strings.Contains(got, "cocoonbox: "+h.mcpURL+" (HTTP) - ! Needs authentication") {
		t.Fatalf("claude mcp list after the OAuth snippet: %v, want cocoonbox needing authentication in\n%s", err, got)
	}

	codexAdd := line(t, out, "codex mcp add ", "")
	authorize := codexSignIn(t, c, codexAdd)
	q := authorize.Query()
	if !strings.HasPrefix(q.Get("client_id"), "https://") {
		t.Errorf("codex mcp add: client_id %q, want its metadata document's https URL", q.Get("client_id"))
	}
	checkAuthorize(t, h, authorize)
	got, err = sh("codex mcp list")
	if err != nil || !regexp.MustCompile(`(?m)^cocoonbox +`+regexp.QuoteMeta(h.mcpURL)+` .*enabled +Not logged in`).MatchString(got) {
		t.Fatalf("codex mcp list after codex mcp add: %v, want cocoonbox not logged in, in\n%s", err, got)
	}
	got, err = sh("codex mcp get cocoonbox --json")
	for _, want := range []string{`"type": "streamable_http"`, `"url": "` + h.mcpURL + `"`, `"http_headers": null`} {
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("codex mcp get cocoonbox: %v, want %s in\n%s", err, want, got)
		}
	}

	// Dynamic registration: codex registers at /cocoonbox.oauth/register
	// and signs in with the client_id the api gave it.
	authorize = codexSignIn(t, c, "codex mcp login cocoonbox --oauth-client-registration dcr")
	if id := authorize.Query().Get("client_id"); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("codex mcp login with dcr: client_id %q, want one the api registered", id)
	}
	checkAuthorize(t, h, authorize)
}

// codexSignIn runs cmdline (codex mcp add or login), which prints the
// authorization URL and waits for its loopback redirect, reads that URL
// and ends codex.
func codexSignIn(t *testing.T, c clisHome, cmdline string) *url.URL {
	t.Helper()
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	cmd := c.command(ctx, cmdline)
	r, w, err := os.Pipe() // codex prints the URL on stdout or stderr: read both
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }() // codex waits for the redirect: end it
	var seen strings.Builder
	for sc := bufio.NewScanner(r); sc.Scan(); {
		fmt.Fprintln(&seen, sc.Text())
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "http") && strings.Contains(l, "/cb/oauth/authorize?") {
			u, err := url.Parse(l)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
	}
	t.Fatalf("%s printed no authorization URL:\n%s", cmdline, seen.String())
	return nil
}

// checkAuthorize holds the authorization request a CLI made to the
// contract: this api's consent page, code with S256 and a 43-character
// challenge, scope boxes, the control MCP as resource, a loopback redirect.
func checkAuthorize(t *testing.T, h *env, u *url.URL) {
	t.Helper()
	q := u.Query()
	if got := u.Scheme + "://" + u.Host + u.Path; got != h.api.URL+"/cb/oauth/authorize" {
		t.Errorf("authorization endpoint %s, want %s/cb/oauth/authorize", got, h.api.URL)
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme != "http" || redirect.Hostname() != "127.0.0.1" {
		t.Errorf("redirect_uri %q, want http on loopback", q.Get("redirect_uri"))
	}
	for k, want := range map[string]string{"response_type": "code", "code_challenge_method": "S256", "scope": "boxes", "resource": h.mcpURL} {
		if q.Get(k) != want {
			t.Errorf("authorization request %s=%q, want %q (%s)", k, q.Get(k), want, u)
		}
	}
	if len(q.Get("code_challenge")) != 43 || q.Get("state") == "" {
		t.Errorf("authorization request without a 43-character challenge and a state: %s", u)
	}
}

// clisHome runs the real CLIs (first on PATH) with a HOME of its own.
type clisHome struct {
	ctx       context.Context
	home, bin string
}

func newCLIsHome(t *testing.T, ctx context.Context) clisHome {
	return clisHome{ctx: ctx, home: t.TempDir(), bin: filepath.Join(clis.Dir(t), "node_modules/.bin")}
}

// command is cmdline under sh, in a process group of its own, which ctx
// ends with SIGTERM: the npm package's node script runs codex's own
// binary as its child, which a SIGKILL of node alone left running,
// holding codex's home.
func (c clisHome) command(ctx context.Context, cmdline string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", "exec "+cmdline)
	cmd.Env = append(os.Environ(), "HOME="+c.home, "PATH="+c.bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// sh runs cmdline and answers its combined output.
func (c clisHome) sh(cmdline string) (string, error) {
	b, err := c.command(c.ctx, cmdline).CombinedOutput()
	return string(b), err
}

// line is the first line of out that starts with prefix and, unless
// with is "", holds with.
func line(t *testing.T, out, prefix, with string) string {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, with) {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("no line starting %q with %q in:\n%s", prefix, with, out)
	return ""
}

func mustRun(t *testing.T, ctx context.Context, cli harness.CLI, args ...string) string {
	t.Helper()
	out, err := cli.Run(ctx, "", args...)
	if err != nil {
		t.Fatalf("cocoonbox %v: %v\n%s", args, err, out)
	}
	return out
}
