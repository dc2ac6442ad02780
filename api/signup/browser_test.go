package signup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/webdriver"

	"github.com/cocoonbox/cocoonbox/api/signup"
)

// The whole browser path in a real headless Chromium, for a known
// identity: a console page sends the browser to the sign-in page, "Sign in
// with GitHub" goes to GitHub (the stand-in, over TLS), GitHub back to the
// callback, and the browser lands signed in on the page it asked for (the
// Strict session cookie is there on its first load). Then a login_error
// link shows the page's own text for its code, and only that.
func TestGitHubSignInInARealBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.link("1001", e.alice.ID)
	e.gh.SignInAs(githubtest.Verified(1001, "alice-gh", "alice@example.com"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := webdriver.StartWith(ctx, "--ignore-certificate-errors-spki-list="+e.gh.SPKI)
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
	step("open /cb/token", b.Go(ctx, e.url+"/cb/token"))
	step("the sign-in page offers GitHub", b.WaitFor(ctx, "the sign-in page", func(_, text string) bool {
		return strings.Contains(text, "Sign in with GitHub") && strings.Contains(text, "Password")
	}))
	step("click Sign in with GitHub", b.Click(ctx, "#github-signin"))
	step("signed in on the token page", b.WaitFor(ctx, "the token page", func(url, text string) bool {
		return strings.HasPrefix(url, e.url+"/cb/token") && strings.Contains(text, "You have no personal token") && strings.Contains(text, "alice")
	}))
	if e.gh.Calls("GET /login/oauth/authorize") != 1 || e.gh.Live() != 0 {
		t.Fatalf("GitHub saw %d authorize, %d tokens live", e.gh.Calls("GET /login/oauth/authorize"), e.gh.Live())
	}

	step("sign out", b.Click(ctx, "#signout"))
	step("signed out", b.WaitFor(ctx, "the sign-in page", func(_, text string) bool { return strings.Contains(text, "Sign in to cocoonbox") }))
	for code, want := range map[string]string{
		signup.ErrGitHubDenied:   "You did not allow the sign-in at GitHub.",
		signup.ErrSignupClosed:   "signup is closed",
		"Your+account+is+hacked": "Signing in failed; try again.",
	} {
		step("open a login_error link", b.Go(ctx, e.url+"/cb/?login_error="+code))
		step("its text", b.WaitFor(ctx, want, func(_, text string) bool {
			return strings.Contains(text, want) && !strings.Contains(text, "hacked")
		}))
	}
}

// The connected accounts page in a real browser: a password account
// connects its GitHub account through GitHub and comes back to the page,
// which shows it; Disconnect takes it away again.
func TestConnectFromTheConsolePageInARealBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.gh.SignInAs(githubtest.Verified(4242, "alice-gh", "alice@example.com"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := webdriver.StartWith(ctx, "--ignore-certificate-errors-spki-list="+e.gh.SPKI)
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
	step("open /cb/identities", b.Go(ctx, e.url+"/cb/identities"))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", "correct horse"))
	step("submit", b.Click(ctx, "#signin-submit"))
	step("the page", b.WaitFor(ctx, "not connected", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/identities") && strings.Contains(text, "GitHub: not connected.")
	}))
	step("click Connect GitHub", b.Click(ctx, "#connect"))
	step("connected", b.WaitFor(ctx, "the connected account", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/identities") && strings.Contains(text, "GitHub: alice-gh (account 4242)")
	}))
	if n := e.count("SELECT count(*) FROM identities WHERE subject = '4242' AND user_id = $1", e.alice.ID); n != 1 {
		t.Fatal("no identity stored")
	}
	step("click Disconnect GitHub", b.Click(ctx, "#disconnect"))
	step("confirm the disconnect", b.Click(ctx, "#confirm-ok"))
	step("disconnected", b.WaitFor(ctx, "not connected again", func(_, text string) bool { return strings.Contains(text, "GitHub: not connected.") }))
	if n := e.count("SELECT count(*) FROM identities"); n != 0 {
		t.Fatal("the identity stays")
	}
}
