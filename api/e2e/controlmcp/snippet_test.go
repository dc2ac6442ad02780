package controlmcp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e"
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
	cli := e2e.CLI{Bin: bins.CLI, ConfigDir: t.TempDir(), Env: []string{"COCOONBOX_TOKEN=" + h.alice}}
	out, err := cli.Run(ctx, "", "mcp", "--endpoint", h.api.URL)
	if err != nil {
		t.Fatalf("cocoonbox mcp: %v\n%s", err, out)
	}
	bin := filepath.Join(clis.Dir(t), "node_modules/.bin")
	home := t.TempDir()
	// sh runs a command line with the CLIs first on PATH and a HOME of its own.
	sh := func(cmdline string) (string, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
		cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+bin+":"+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	add := line(t, out, "claude mcp add ")
	if b, err := sh(add); err != nil {
		t.Fatalf("%s: %v\n%s", add, err, b)
	}
	got, err := sh("claude mcp get cocoonbox")
	if err != nil || !strings.Contains(got, "Connected") || !strings.Contains(got, h.mcpURL) {
		t.Fatalf("claude mcp get cocoonbox after the snippet: %v\n%s", err, got)
	}

	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	toml := out[strings.Index(out, "[mcp_servers.cocoonbox]"):]
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = sh("codex mcp get cocoonbox --json")
	for _, want := range []string{`"type": "streamable_http"`, `"url": "` + h.mcpURL + `"`, `"Authorization": "Bearer ` + h.alice + `"`} {
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("codex mcp get cocoonbox: %v, want %s in\n%s", err, want, got)
		}
	}

	id := line(t, mustRun(t, ctx, cli, "devices", "--endpoint", h.api.URL), "* ")
	mustRun(t, ctx, cli, "devices", "revoke", strings.Fields(id)[1], "--endpoint", h.api.URL)
	if got, _ := sh("claude mcp get cocoonbox"); strings.Contains(got, "Connected") {
		t.Fatalf("claude still connects with the revoked token:\n%s", got)
	}
}

// line is the first line of out that starts with prefix.
func line(t *testing.T, out, prefix string) string {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("no line starting %q in:\n%s", prefix, out)
	return ""
}

func mustRun(t *testing.T, ctx context.Context, cli e2e.CLI, args ...string) string {
	t.Helper()
	out, err := cli.Run(ctx, "", args...)
	if err != nil {
		t.Fatalf("cocoonbox %v: %v\n%s", args, err, out)
	}
	return out
}
