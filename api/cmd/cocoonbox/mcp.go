package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/mcp/mcpurl"
)

// mcpClients are the coding CLIs `cocoonbox mcp` writes a snippet for.
var mcpClients = []string{"claude", "codex"}

// mcpSnippet prints what a user pastes into claude's or codex's MCP
// configuration (both without an argument) to reach the control MCP of
// the endpoint with this CLI's token: a streamable HTTP server with the
// token as its Authorization: Bearer header. The token is printed: the
// snippet is for the user's own configuration, which keeps it.
//
// Contract: Control MCP (box lifecycle for native agents, M4.7).
func mcpSnippet(args []string, stdout io.Writer) error {
	fs := flags("mcp")
	pos, st, err := begin(fs, args, 1, stdout)
	if err != nil {
		return err
	}
	which := mcpClients
	if len(pos) == 1 {
		if pos[0] != "claude" && pos[0] != "codex" {
			return usageError{fmt.Sprintf("mcp: %q is not claude or codex", pos[0])}
		}
		which = pos
	}
	token, err := st.token()
	if err != nil {
		return err
	}
	url := st.endpoint + mcpurl.Path
	for i, c := range which {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if c == "claude" {
			fmt.Fprint(stdout, claudeSnippet(url, token))
		} else {
			fmt.Fprint(stdout, codexSnippet(url, token))
		}
	}
	return nil
}

// claudeSnippet is the `claude mcp add` line (claude mcp add --help:
// --transport http, --header) and the same server as .mcp.json holds it.
func claudeSnippet(url, token string) string {
	entry, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"cocoonbox": map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + token}}}}, "", "  ")
	return fmt.Sprintf(`# Claude Code: run once (kept in ~/.claude.json for every project)
claude mcp add --transport http --scope user cocoonbox %s --header %s
# or put this in a project's .mcp.json:
%s
`, shellQuote(url), shellQuote("Authorization: Bearer "+token), entry)
}

// codexSnippet is the server as ~/.codex/config.toml holds it
// ([mcp_servers.NAME] with url and http_headers; codex mcp add --url sets
// the same url but takes a bearer only from an environment variable).
func codexSnippet(url, token string) string {
	return fmt.Sprintf(`# Codex: add to ~/.codex/config.toml
[mcp_servers.cocoonbox]
url = %s
http_headers = { Authorization = %s }
`, tomlString(url), tomlString("Bearer "+token))
}

// shellQuote is s in single quotes for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tomlString is s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string { b, _ := json.Marshal(s); return string(b) }
