//go:build booted

package controlmcp

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/syncbuf"
)

// The real codex signs in to the built api end to end, without its own
// services: codex mcp login with dynamic registration prints the consent
// page's URL and waits on its loopback redirect; headless Chromium signs
// alice in there and clicks Allow; codex exchanges the code at the token
// endpoint and says it is logged in, and codex mcp list shows the server
// with OAuth; alice's Agents page lists codex's grant.
//
// Contract: OAuth for agents (Clients, Authorization, Tokens); issue 27,
// Must show (the real CLIs).
func TestCodexSignsInThroughTheConsentPage(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCLIsHome(t, ctx)
	if err := os.MkdirAll(filepath.Join(c.home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.home, ".codex", "config.toml"),
		[]byte(fmt.Sprintf("[mcp_servers.cocoonbox]\nurl = %q\n", h.mcpURL)), 0o600); err != nil {
		t.Fatal(err)
	}

	login := c.command(ctx, "codex mcp login cocoonbox --oauth-client-registration dcr")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	login.Stdout, login.Stderr = w, w
	err = login.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out syncbuf.Buffer
	authorize := make(chan string, 1)
	go func() {
		for sc := bufio.NewScanner(r); sc.Scan(); {
			fmt.Fprintln(&out, sc.Text())
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "http") && strings.Contains(l, "/cb/oauth/authorize?") {
				authorize <- l
			}
		}
		close(authorize)
	}()
	exited := make(chan error, 1)
	go func() { exited <- login.Wait() }()
	url, ok := <-authorize
	if !ok {
		t.Fatalf("codex mcp login printed no authorization URL:\n%s", out.String())
	}

	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v\ncodex:\n%s", what, err, out.String())
		}
	}
	step("open codex's authorization URL", b.Go(ctx, url))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", password))
	step("sign in", b.Click(ctx, "#signin-submit"))
	step("the consent", b.WaitFor(ctx, "the consent page", func(_, text string) bool {
		return strings.Contains(text, "Allow") && strings.Contains(text, "loopback")
	}))
	step("allow", b.Click(ctx, "#allow"))
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(strings.ToLower(out.String()), "success") {
			t.Fatalf("codex mcp login after Allow: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatalf("codex mcp login did not end after Allow:\n%s", out.String())
	}
	got, err := c.sh("codex mcp list")
	if err != nil || !regexp.MustCompile(`(?m)^cocoonbox +`+regexp.QuoteMeta(h.mcpURL)+` .*enabled +OAuth`).MatchString(got) {
		t.Fatalf("codex mcp list after its sign-in: %v, want cocoonbox with OAuth, in\n%s", err, got)
	}
	con, err := harness.SignIn(ctx, h.api.URL, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	if status, body, _ := con.Do(ctx, "GET", "/cb/api/agents", nil); status != 200 || !strings.Contains(body, `"new":true`) {
		t.Fatalf("alice's agents after codex signed in: %d %s", status, body)
	}
}
