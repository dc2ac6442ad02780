package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

// cocoonbox mcp --with-token prints claude's and codex's snippets for the
// endpoint's control MCP in both forms: OAuth's (the URL alone) and the
// CLI's token ($COCOONBOX_TOKEN here), the latter never as a project's
// .mcp.json; the real CLIs read them in api/e2e/controlmcp.
func TestMCPPrintsBothSnippets(t *testing.T) {
	tok := "cb_" + strings.Repeat("ab", 32)
	t.Setenv("COCOONBOX_TOKEN", tok)
	out, err := runCLI(t, "", "mcp", "--with-token", "--endpoint", "https://api.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://api.example.test/cocoonbox.mcp/control"
	for _, want := range []string{
		"\nclaude mcp add --transport http --scope user cocoonbox '" + url + "'\n",
		"\ncodex mcp add cocoonbox --url '" + url + "'\n",
		"\n[mcp_servers.cocoonbox]\nurl = \"" + url + "\"\n#",
		"claude mcp add --transport http --scope user cocoonbox '" + url + "' --header 'Authorization: Bearer " + tok + "'",
		"[mcp_servers.cocoonbox]\nurl = \"" + url + "\"\nhttp_headers = { Authorization = \"Bearer " + tok + "\" }\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cocoonbox mcp has no %q:\n%s", want, out)
		}
	}
	servers := mcpJSONs(t, out)
	if len(servers) != 1 {
		t.Fatalf("cocoonbox mcp printed %d .mcp.json snippets, want 1 (OAuth's):\n%s", len(servers), out)
	}
	if s := servers[0]; s.Type != "http" || s.URL != url || s.Headers != nil {
		t.Errorf("the OAuth .mcp.json snippet: %+v", s)
	}
	if only, _ := runCLI(t, "", "mcp", "codex", "--endpoint", "https://api.example.test"); strings.Contains(only, "claude") || !strings.Contains(only, "[mcp_servers.cocoonbox]") {
		t.Fatalf("cocoonbox mcp codex:\n%s", only)
	}
}

// Signed out, cocoonbox mcp prints the OAuth forms, which need no token,
// and says why the token forms are missing.
func TestMCPSignedOutPrintsTheOAuthForms(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "")
	out, err := runCLI(t, "", "mcp", "--with-token", "--endpoint", "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:1/cocoonbox.mcp/control"
	for _, want := range []string{
		"\nclaude mcp add --transport http --scope user cocoonbox '" + url + "'\n",
		"\ncodex mcp add cocoonbox --url '" + url + "'\n",
		"# With this CLI's token instead: not signed in to http://127.0.0.1:1: run cocoonbox login",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cocoonbox mcp signed out has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Bearer") || strings.Contains(out, "--header") {
		t.Errorf("cocoonbox mcp signed out printed a token form:\n%s", out)
	}
	if s := mcpJSONs(t, out); len(s) != 1 || s[0].URL != url || s[0].Headers != nil {
		t.Errorf("cocoonbox mcp signed out: .mcp.json snippets %+v", s)
	}
}

// mcpServer is the cocoonbox entry of a .mcp.json snippet.
type mcpServer struct {
	Type, URL string
	Headers   map[string]string
}

// mcpJSONs are the cocoonbox entries of the .mcp.json snippets in out, in
// order (each starts with a line "{").
func mcpJSONs(t *testing.T, out string) []mcpServer {
	t.Helper()
	var got []mcpServer
	for rest := out; ; {
		i := strings.Index(rest, "\n{\n")
		if i < 0 {
			return got
		}
		dec := json.NewDecoder(strings.NewReader(rest[i+1:]))
		var cfg struct {
			MCPServers map[string]mcpServer `json:"mcpServers"`
		}
		if err := dec.Decode(&cfg); err != nil {
			t.Fatalf("a .mcp.json snippet: %v\n%s", err, out)
		}
		got = append(got, cfg.MCPServers["cocoonbox"])
		rest = rest[i+1+int(dec.InputOffset()):]
	}
}

func TestMCPBadInput(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "")
	var ue command.UsageError
	if _, err := runCLI(t, "", "mcp", "cursor"); !errors.As(err, &ue) || !strings.Contains(err.Error(), `"cursor" is not claude or codex`) {
		t.Errorf("mcp cursor: %v", err)
	}
	if _, err := runCLI(t, "", "mcp", "claude", "codex"); !errors.As(err, &ue) {
		t.Errorf("mcp claude codex: %v, want a usage error", err)
	}
	if out, err := runCLI(t, "", "mcp", "--help"); err != nil || !strings.Contains(out, "Usage:\n  cocoonbox mcp [claude|codex]") {
		t.Errorf("mcp --help: %v %q", err, out)
	}
}

// Issue 45, Deliver 4: without --with-token, cocoonbox mcp prints the
// OAuth forms only, never the account's token (a snippet is pasted into
// files people commit), and says how to get the token form.
func TestMCPPrintsNoTokenWithoutTheFlag(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("ab", 32))
	for _, args := range [][]string{{"mcp"}, {"mcp", "claude"}, {"mcp", "codex"}} {
		out, err := runCLI(t, "", append(args, "--endpoint", "https://api.example.test")...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "cb_") || strings.Contains(out, "Bearer") {
			t.Errorf("cocoonbox %v printed the token:\n%s", args, out)
		}
		if !strings.Contains(out, "--with-token") {
			t.Errorf("cocoonbox %v does not say how to get the token form:\n%s", args, out)
		}
	}
}
