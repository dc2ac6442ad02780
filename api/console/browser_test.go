package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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
	ctx, b, step := browser(t)
	shot := func(name string) {
		if dir := os.Getenv("COCOONBOX_CONSOLE_SHOTS"); dir != "" {
			if png, err := b.Screenshot(ctx); err == nil {
				os.WriteFile(dir+"/"+name+".png", png, 0o644)
			}
		}
	}
	step("open /cb/token", b.Go(ctx, e.url+"/cb/token"))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type a wrong password", b.Type(ctx, "#password", "wrong horse"))
	shot("signin")
	step("submit", b.Click(ctx, "#signin-submit"))
	step("the refusal shown", b.WaitFor(ctx, "the refusal", func(_, text string) bool { return strings.Contains(text, "Wrong user name or password") }))
	step("a fresh form", b.Go(ctx, e.url+"/cb/token"))
	step("type the user again", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", "correct horse"))
	step("submit again", b.Click(ctx, "#signin-submit"))
	step("back on the token page", b.WaitFor(ctx, "the token page", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/token") && strings.Contains(text, "You have no personal token")
	}))
	token := makeToken(ctx, b, step)
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

// A page of another port of this host is the same site, so the Strict
// session cookie goes along with its form: a field-less form (an empty
// body, sent as a form) and a no-cors fetch of nothing must not replace
// the personal token (POST /cb/api/me/token took an empty body without
// the JSON-only check).
func TestAFormOfAnotherPortOfThisHostCannotReplaceThePersonalToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx, b, step := browser(t)
	step("open /cb/token", b.Go(ctx, e.url+"/cb/token"))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", "correct horse"))
	step("submit", b.Click(ctx, "#signin-submit"))
	step("the token page", b.WaitFor(ctx, "the token page", func(_, text string) bool { return strings.Contains(text, "You have no personal token") }))
	token := makeToken(ctx, b, step)

	target := e.url + "/cb/api/me/token"
	page := `<!doctype html><title>another page</title><p id="fetched">not yet</p>
<form method="POST" action="` + target + `"></form>
<script>
fetch("` + target + `", {method: "POST", mode: "no-cors", credentials: "include"})
  .finally(() => { document.getElementById("fetched").textContent = "fetched"; });
</script>`
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/form" {
			w.Write([]byte(strings.Replace(page, "</script>", "document.forms[0].submit();</script>", 1)))
			return
		}
		w.Write([]byte(page))
	}))
	defer other.Close()
	if !strings.HasPrefix(other.URL, "http://127.0.0.1:") || !strings.HasPrefix(e.url, "http://127.0.0.1:") {
		t.Fatalf("the pages are not on one host: %s and %s", other.URL, e.url)
	}
	step("the other port's fetch", b.Go(ctx, other.URL+"/fetch"))
	step("fetched", b.WaitFor(ctx, "the fetch", func(_, text string) bool { return strings.Contains(text, "fetched") }))
	step("the other port's form", b.Go(ctx, other.URL+"/form"))
	step("the form's answer", b.WaitFor(ctx, "the api's answer to the form", func(url, text string) bool {
		return url == target && text != ""
	}))
	text, err := b.Text(ctx)
	step("read the answer", err)
	if strings.Contains(text, "cb_") || !strings.Contains(text, "application/json") {
		t.Errorf("the form was answered %q; want the JSON-only refusal", text)
	}
	if _, err := e.index.Check(token); err != nil {
		t.Fatalf("the personal token no longer works after another page's requests: %v", err)
	}
}

// browser starts headless Chromium for one test (closed at its end), with
// the context its steps run in and step, which fails the test on a step's
// error.
func browser(t *testing.T) (context.Context, *webdriver.Browser, func(what string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return ctx, b, func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// makeToken clicks the token page's button and answers the token it shows once.
func makeToken(ctx context.Context, b *webdriver.Browser, step func(string, error)) string {
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
	return token
}
