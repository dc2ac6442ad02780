package main

import (
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
)

// cocoonbox mcp prints claude's and codex's snippets for the endpoint's
// control MCP with the CLI's token ($COCOONBOX_TOKEN here); the real CLIs
// read them in api/e2e.
func TestMCPPrintsBothSnippets(t *testing.T) {
	tok := "cb_" + strings.Repeat("ab", 32)
	t.Setenv("COCOONBOX_TOKEN", tok)
	out, err := runCLI(t, "", "mcp", "--endpoint", "https://api.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://api.example.test/cocoonbox.mcp/control"
	for _, want := range []string{
		"claude mcp add --transport http --scope user cocoonbox '" + url + "' --header 'Authorization: Bearer " + tok + "'",
		"[mcp_servers.cocoonbox]\nurl = \"" + url + "\"\nhttp_headers = { Authorization = \"Bearer " + tok + "\" }\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cocoonbox mcp has no %q:\n%s", want, out)
		}
	}
	start := strings.Index(out, "{")
	var cfg struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	if err := json.NewDecoder(strings.NewReader(out[start:])).Decode(&cfg); err != nil {
		t.Fatalf("the .mcp.json snippet: %v\n%s", err, out)
	}
	if s := cfg.MCPServers["cocoonbox"]; s.Type != "http" || s.URL != url || s.Headers["Authorization"] != "Bearer "+tok {
		t.Fatalf("the .mcp.json snippet: %+v", cfg)
	}
	if only, _ := runCLI(t, "", "mcp", "codex", "--endpoint", "https://api.example.test"); strings.Contains(only, "claude") || !strings.Contains(only, "[mcp_servers.cocoonbox]") {
		t.Fatalf("cocoonbox mcp codex:\n%s", only)
	}
}

func TestMCPBadInput(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "")
	var ue usageError
	if _, err := runCLI(t, "", "mcp", "cursor"); !errors.As(err, &ue) || !strings.Contains(err.Error(), `"cursor" is not claude or codex`) {
		t.Errorf("mcp cursor: %v", err)
	}
	if _, err := runCLI(t, "", "mcp", "claude", "codex"); !errors.As(err, &ue) {
		t.Errorf("mcp claude codex: %v, want a usage error", err)
	}
	if _, err := runCLI(t, "", "mcp", "--endpoint", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "not signed in") {
		t.Errorf("mcp signed out: %v, want not signed in", err)
	}
	if out, err := runCLI(t, "", "mcp", "--help"); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out, "usage: ") {
		t.Errorf("mcp --help: %v %q", err, out)
	}
}
