package console

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// The console in a real headless Chromium: a wrong password is told on the
// page, the right one signs in to the home page, and the token page makes a
// personal token that works. COCOONBOX_CONSOLE_SHOTS=DIR keeps screenshots.
func TestConsoleInARealBrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	shot := func(name string) {
		if dir := os.Getenv("COCOONBOX_CONSOLE_SHOTS"); dir != "" {
			if png, err := b.Screenshot(ctx); err == nil {
				os.WriteFile(dir+"/"+name+".png", png, 0o644)
			}
		}
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("open /cb/token", b.Go(ctx, e.url+"/cb/token"))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type a wrong password", b.Type(ctx, "#password", "wrong horse"))
	shot("signin")
	step("submit", b.Click(ctx, "#signin-submit"))
	step("the refusal shown", b.WaitFor(ctx, "the refusal", func(_, text string) bool { return strings.Contains(text, "wrong user name or password") }))
	step("a fresh form", b.Go(ctx, e.url+"/cb/token"))
	step("type the user again", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", "correct horse"))
	step("submit again", b.Click(ctx, "#signin-submit"))
	step("back on the token page", b.WaitFor(ctx, "the token page", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/token") && strings.Contains(text, "You have no personal token")
	}))
	step("make a token", b.Click(ctx, "#token-generate"))
	var token string
	step("the token shown once", b.WaitFor(ctx, "the token", func(_, text string) bool {
		i := strings.Index(text, "cb_")
		if i < 0 || len(text) < i+tokens.Len {
			return false
		}
		token = text[i : i+tokens.Len]
		return strings.Contains(text, "You have a personal token")
	}))
	shot("token")
	if p, err := e.index.Check(token); err != nil || p.UserName != "alice" {
		t.Fatalf("the token the page showed: %v, %v", p, err)
	}
	step("home", b.Go(ctx, e.url+"/cb/"))
	step("the sections", b.WaitFor(ctx, "the home page", func(_, text string) bool {
		return strings.Contains(text, "Hello, alice") && strings.Contains(text, "Devices")
	}))
	shot("home")
	step("sign out", b.Click(ctx, "#signout"))
	step("the sign-in form again", b.WaitFor(ctx, "signed out", func(_, text string) bool { return strings.Contains(text, "Sign in to cocoonbox") }))
}
