package agents_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/agents"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The Agents page in a real headless Chromium: the home page's notice
// names the new agent; /cb/agents (through the sign-in) lists it with its
// host (unverified), caps and boxes, marked new, and opening it marks it
// seen, so the notice ends; its Revoke button stops the agent's token.
func TestTheAgentsPageInARealBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, g := e.signIn("alice").grant("codex", 2, 1)
	e.box(e.alice.ID, "agent", "running", g.ID)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("open /cb/", b.Go(ctx, e.url+"/cb/"))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", password))
	step("sign in", b.Click(ctx, "#signin-submit"))
	step("the notice on the home page", b.WaitFor(ctx, "the notice", func(_, text string) bool {
		return strings.Contains(text, "A new agent can use your account: codex. Review it on the Agents page.")
	}))
	step("follow the notice", b.Click(ctx, "p.notice a"))
	step("the agent listed", b.WaitFor(ctx, "the agent's row", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/agents") && (strings.Contains(text, "codexnew") || strings.Contains(text, "codex new")) &&
			strings.Contains(text, "unverified") && strings.Contains(text, "2 boxes, 1 running") && strings.Contains(text, "agent (running)")
	}))
	wait.Eventually(t, 10*time.Second, "opening the page marks the agent seen", func() (bool, string) {
		list, err := agents.NewStore(e.db.Pool, e.grants).List(ctx, e.alice.ID)
		return err == nil && len(list) == 1 && !list[0].New, fmt.Sprint(list, err)
	})
	step("home again", b.Go(ctx, e.url+"/cb/"))
	step("no notice", b.WaitFor(ctx, "the home page without the notice", func(_, text string) bool {
		return strings.Contains(text, "Hello, alice") && strings.Contains(text, "Agents") && !strings.Contains(text, "new agent")
	}))
	step("the Agents page again", b.Go(ctx, e.url+"/cb/agents"))
	step("not new any more", b.WaitFor(ctx, "the agent's row, not new", func(_, text string) bool {
		return strings.Contains(text, "codex") && !strings.Contains(text, "codexnew") && !strings.Contains(text, "codex new")
	}))
	step("revoke", b.Click(ctx, "#agent-"+g.ID+" .revoke"))
	step("confirm the revoke", b.Click(ctx, "#confirm-ok"))
	step("the agent gone", b.WaitFor(ctx, "no agent", func(_, text string) bool { return strings.Contains(text, "No agent can use your account.") }))
	if _, err := e.grants.Check(token); !errors.Is(err, oauth.ErrBadToken) {
		t.Fatalf("the revoked agent's token: %v, want ErrBadToken", err)
	}
}
