package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The built api with OAuth for agents on: the Agents page's calls and
// the home page's notice are mounted, and sign out everywhere (the
// Devices page's call) ends every grant of the user: the agent's token is
// refused on the control MCP; another user's agent keeps working.
//
// Contract: OAuth for agents, "The user"; issue 27, Deliver 6.
func TestSignOutEverywhereEndsTheAgentsGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db := dbtest.New(t)
	api, err := harness.Start(ctx, bins.API, harness.Options{StateDir: t.TempDir(), DatabaseURL: db.URL, OAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		api.Stop()
		if t.Failed() {
			t.Logf("api log:\n%s", api.Log())
		}
	})
	agent := func(name string) (*harness.Console, string) {
		if err := api.AddUser(ctx, name, password); err != nil {
			t.Fatal(err)
		}
		c, err := harness.SignIn(ctx, api.URL, name, password)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := c.Agent(ctx, "codex", 2, 1)
		if err != nil {
			t.Fatal(err)
		}
		return c, tok
	}
	alice, aliceAgent := agent("alice")
	_, bobAgent := agent("bob")
	initialize := func(tok string) int {
		req, _ := http.NewRequestWithContext(ctx, "POST", api.URL+"/cocoonbox.mcp/control", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := initialize(aliceAgent); code != http.StatusOK {
		t.Fatalf("alice's agent on the control MCP: %d, want 200", code)
	}
	if status, body, _ := alice.Do(ctx, "GET", "/cb/api/agents", nil); status != http.StatusOK || !strings.Contains(body, `"client_name":"codex"`) || !strings.Contains(body, `"new":true`) {
		t.Fatalf("GET /cb/api/agents: %d %s", status, body)
	}
	if status, body, _ := alice.Do(ctx, "GET", "/cb/", nil); status != http.StatusOK || !strings.Contains(body, "A new agent can use your account: codex.") {
		t.Fatalf("the console's home page: %d, no notice of the new agent:\n%s", status, body)
	}
	if status, body, _ := alice.Post(ctx, "/cb/api/me/sign-out-everywhere", map[string]string{}); status != http.StatusNoContent {
		t.Fatalf("sign out everywhere: %d %s", status, body)
	}
	wait.Eventually(t, 10*time.Second, "alice's agent refused after sign out everywhere", func() (bool, string) {
		code := initialize(aliceAgent)
		return code == http.StatusUnauthorized, fmt.Sprint(code)
	})
	if code := initialize(bobAgent); code != http.StatusOK {
		t.Fatalf("bob's agent after alice signed out everywhere: %d, want 200", code)
	}
}

// Revoking an agent on the Agents page of the built api ends its open
// control MCP session at once: the session's event stream closes (the
// client's session ends) and its token is refused.
//
// Contract: OAuth for agents, "The user" (its open box and control MCP
// exchanges end); issue 27, Must show.
func TestRevokingAnAgentEndsItsOpenMCPSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db := dbtest.New(t)
	api, err := harness.Start(ctx, bins.API, harness.Options{StateDir: t.TempDir(), DatabaseURL: db.URL, OAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		api.Stop()
		if t.Failed() {
			t.Logf("api log:\n%s", api.Log())
		}
	})
	if err := api.AddUser(ctx, "alice", password); err != nil {
		t.Fatal(err)
	}
	alice, err := harness.SignIn(ctx, api.URL, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Agent(ctx, "codex", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := mcptest.Connect(t, api.URL+"/cocoonbox.mcp/control", tok)
	if _, err := c.ListTools(ctx, nil); err != nil {
		t.Fatalf("the agent's tools/list before the revoke: %v", err)
	}
	_, body, _ := alice.Do(ctx, "GET", "/cb/api/agents", nil)
	var list []struct{ ID string }
	if json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 {
		t.Fatalf("GET /cb/api/agents: %s", body)
	}
	ended := make(chan error, 1)
	go func() { ended <- c.Wait() }()
	if status, body, _ := alice.Do(ctx, "DELETE", "/cb/api/agents/"+list[0].ID, nil); status != http.StatusNoContent {
		t.Fatalf("DELETE /cb/api/agents/%s: %d %s", list[0].ID, status, body)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's MCP session is still open 30 s after the revoke")
	}
	if _, err := c.ListTools(ctx, nil); err == nil {
		t.Fatal("the revoked agent's tools/list still works")
	}
}
