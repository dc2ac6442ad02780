package main

import (
	"os/exec"
	"strings"
	"testing"
)

// serverDeps are the packages the user's CLI must not link: the api's
// server packages, PostgreSQL's driver, the migrations and the MCP SDK.
// What both sides share lives in small packages beside them
// (signin/firstparty, tokens/bearer, session/execrules, mcp/mcpurl).
var serverDeps = []string{
	"github.com/jackc/pgx/",
	"github.com/pressly/goose/",
	"github.com/modelcontextprotocol/go-sdk/",
}

// serverPackages are the api's server packages, by exact path.
var serverPackages = []string{
	"signin", "tokens", "session", "mcp", "users", "boxes", "database",
	"server", "sandbox", "devices", "console", "vault",
}

// The CLI links no server package: it is a client of the api, and its
// binary and build stay a client's size (issue 25: it linked 350 packages,
// pgx, goose and the MCP server among them, for eight names).
func TestCLILinksNoServerPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := map[string]bool{}
	for _, p := range serverPackages {
		forbidden["github.com/cocoonbox/cocoonbox/api/"+p] = true
	}
	var bad []string
	for _, dep := range strings.Fields(string(out)) {
		if forbidden[dep] {
			bad = append(bad, dep)
			continue
		}
		for _, prefix := range serverDeps {
			if strings.HasPrefix(dep, prefix) {
				bad = append(bad, dep)
				break
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("cocoonbox links server packages (move the shared name to a small package both sides import):\n%s", strings.Join(bad, "\n"))
	}
}
