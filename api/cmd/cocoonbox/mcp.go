package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// mcpClients are the coding CLIs `cocoonbox mcp` writes a snippet for.
var mcpClients = []string{"claude", "codex"}

// mcpSnippet prints what a user pastes into claude's or codex's MCP
// configuration (both without an argument) to reach the control MCP of
// the endpoint: OAuth's form, the URL alone (the CLI discovers the api's
// authorization server from the MCP's 401, the user approves it in the
// console, and its grant reaches only the boxes it creates). With
// --with-token it adds the token form, a streamable HTTP server with this
// CLI's token as its Authorization: Bearer header, for the user's own
// configuration only (claude's user scope, codex's config.toml; never a
// project's .mcp.json, a file people commit), and warns on stderr that
// the token is the whole account (issue 45). Signed out, --with-token
// says why there is no token form.
//
// Contract: Control MCP (box lifecycle for native agents, M4.7); OAuth
// for agents (MCP authorization 2025-11-25).
func mcpSnippet(fs *command.Flags) runner {
	withToken := fs.Bool("with-token", false, "add the form with this CLI's token (your whole account) for your own configuration")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		which := mcpClients
		if len(pos) == 1 {
			if pos[0] != "claude" && pos[0] != "codex" {
				return command.UsageError{Msg: fmt.Sprintf("mcp: %q is not claude or codex", pos[0])}
			}
			which = pos
		}
		token, tokenErr := st.token()
		url := st.endpoint + client.MCPPath
		if *withToken && tokenErr == nil {
			fmt.Fprintln(os.Stderr, "cocoonbox mcp: warning: the token printed is your whole account (every box, key and device): keep it in your own configuration, never in a project's file; cocoonbox devices revoke cuts it off")
		}
		for i, c := range which {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			oauth, tokenForm := claudeOAuth(url), ""
			if c == "codex" {
				oauth = codexOAuth(url)
			}
			switch {
			case !*withToken:
				tokenForm = "# With this CLI's token instead (your whole account): cocoonbox mcp --with-token\n"
			case tokenErr != nil:
				tokenForm = fmt.Sprintf("# With this CLI's token instead: %v\n", tokenErr)
			case c == "claude":
				tokenForm = claudeSnippet(url, token)
			default:
				tokenForm = codexSnippet(url, token)
			}
			fmt.Fprint(stdout, oauth, tokenForm)
		}
		return nil
	}
}

// claudeOAuth is the OAuth form for claude: `claude mcp add --transport
// http NAME URL` without a header, and the same server in .mcp.json; claude
// signs in when it first connects (or in /mcp).
func claudeOAuth(url string) string {
	entry, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"cocoonbox": map[string]any{
		"type": "http", "url": url}}}, "", "  ")
	return fmt.Sprintf(`# Claude Code, with OAuth (claude opens the sign-in, you approve it in the console,
# and it reaches only the boxes it creates): run once, then /mcp in claude to sign in
claude mcp add --transport http --scope user cocoonbox %s
# or put this in a project's .mcp.json:
%s
`, shellQuote(url), entry)
}

// claudeSnippet is the `claude mcp add` line with the token (claude mcp
// add --help: --transport http, --header), in the user's scope: no
// .mcp.json form, which is a project's file.
func claudeSnippet(url, token string) string {
	return fmt.Sprintf(`# Claude Code, with this CLI's token (your whole account; keep it out of any project's file): run once instead
claude mcp add --transport http --scope user cocoonbox %s --header %s
`, shellQuote(url), shellQuote("Authorization: Bearer "+token))
}

// codexOAuth is the OAuth form for codex: `codex mcp add NAME --url URL`
// (a streamable HTTP server; codex mcp add --help), which finds the api's
// OAuth from the MCP's 401 and starts the sign-in at once, or the same
// entry in config.toml, then `codex mcp login NAME`.
func codexOAuth(url string) string {
	return fmt.Sprintf(`# Codex, with OAuth (you approve it in the console, and it reaches only the
# boxes it creates): run once; it opens the sign-in (again: codex mcp login cocoonbox)
codex mcp add cocoonbox --url %s
# or add to ~/.codex/config.toml, then run codex mcp login cocoonbox:
[mcp_servers.cocoonbox]
url = %s
`, shellQuote(url), tomlString(url))
}

// codexSnippet is the server as ~/.codex/config.toml holds it with the
// token ([mcp_servers.NAME] with url and http_headers; codex mcp add --url
// sets the same url but takes a bearer only from an environment variable).
func codexSnippet(url, token string) string {
	return fmt.Sprintf(`# Codex, with this CLI's token (your whole account): add to ~/.codex/config.toml instead
[mcp_servers.cocoonbox]
url = %s
http_headers = { Authorization = %s }
`, tomlString(url), tomlString("Bearer "+token))
}

// shellQuote is s in single quotes for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tomlString is s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string { b, _ := json.Marshal(s); return string(b) }
