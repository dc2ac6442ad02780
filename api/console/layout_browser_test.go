package console_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
)

// Issue 41, Deliver 1: keyboard focus shows a ring (a field and a
// button reached with Tab each draw the 3 px outline), and the page
// follows prefers-color-scheme (a dark page and a light one, on one
// stylesheet). axe-core in TestEveryPageInEveryState checks the
// contrast of both schemes; this checks that the dark one is there.
func TestTheFocusRingAndDarkModeShow(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	u := newUI(t, a.URL)
	u.signIn("alice")
	u.emulate(desktop, false)
	u.open("/cb/keys")
	u.waitText("Add a key")
	for _, c := range []struct{ from, to string }{{"#key-name", "key-hosts"}, {"#key-value", "add-submit"}} {
		u.typeIn(c.from, "\uE004") // WebDriver's Tab key
		var got struct{ ID, Style, Width string }
		u.js(`const e = document.activeElement, s = getComputedStyle(e); return { id: e.id, style: s.outlineStyle, width: s.outlineWidth };`, &got)
		if got.ID != c.to || got.Style != "solid" || got.Width != "3px" {
			t.Errorf("Tab from %s: focus on #%s, its outline %s %s; want #%s with a 3px solid ring", c.from, got.ID, got.Width, got.Style, c.to)
		}
	}
	// The body's background as the sum of its red, green and blue (0 to 765).
	background := func() int {
		var sum int
		u.js(`return getComputedStyle(document.body).backgroundColor.match(/\d+/g).slice(0, 3).reduce((a, c) => a + Number(c), 0);`, &sum)
		return sum
	}
	light := background()
	u.emulate(desktop, true)
	if dark := background(); light < 600 || dark > 150 {
		t.Errorf("the page's background sums %d light and %d dark (of 765); want a light page and a dark one", light, dark)
	}
}

// Issue 41, Deliver 2: every secret shown once has a Copy button that
// copies it: the personal token, an invite's link and an invite-scoped
// token, and a screen share's link (issue 43). The page's clipboard call is watched (the text it is given);
// where the browser gives no clipboard, the button selects the secret
// for Ctrl+C instead, and says so.
func TestEveryCopyButtonCopiesItsSecret(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sandboxtest.New("cbdesk:v23-desk")))
	a.AddUser("boss", true)
	u := newUI(t, a.URL)
	copies := func(secret string) {
		t.Helper()
		u.js(`window.__copied = "";
if (navigator.clipboard) { const w = navigator.clipboard.writeText.bind(navigator.clipboard);
  navigator.clipboard.writeText = (text) => { window.__copied = text; return w(text); }; }`, nil)
		u.click(`button[data-copy="` + secret + `"]`)
		u.waitFor("the Copy of #"+secret+" answered", `return /^(Copied|Selected)/.test(document.querySelector('button[data-copy="`+secret+`"]').textContent);`)
		var got struct{ Said, Shown, Copied, Selected string }
		u.js(`return { said: document.querySelector('button[data-copy="' + arguments[0] + '"]').textContent, shown: document.getElementById(arguments[0]).textContent,
  copied: window.__copied, selected: String(getSelection()) };`, &got, secret)
		ok := got.Shown != "" && (got.Said == "Copied" && got.Copied == got.Shown || got.Said == "Selected: press Ctrl+C" && got.Selected == got.Shown)
		if !ok {
			t.Errorf("Copy of #%s (%q) says %q; copied %q, selected %q", secret, got.Shown, got.Said, got.Copied, got.Selected)
		}
	}
	u.signIn("alice")
	u.open("/cb/token")
	u.click("#token-generate")
	u.waitText("Copy it now")
	copies("token-value")
	// A box to share, made with a personal token of the test's (the one
	// the page made is replaced: its Copy is proven).
	boxesAPI := controlv1connect.NewBoxesClient(http.DefaultClient, a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(a.PersonalToken(a.User.ID)))))
	if _, err := boxesAPI.Create(context.Background(), connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "copy-create", Name: "main", Image: "cbdesk:v23-desk"})); err != nil {
		t.Fatalf("create main: %v", err)
	}
	u.open("/cb/boxes")
	u.waitText("Running", "You have shared no screen yet")
	u.click("#share-submit")
	u.waitText("shown once")
	copies("share-link")
	u.signOut()
	u.signIn("boss")
	u.open("/cb/admin")
	u.waitText("Invite-scoped tokens")
	u.click("#invite-create")
	u.waitText("The link, shown once")
	copies("invite-link")
	u.typeIn("#token-label", "the docs bot")
	u.click("#token-create")
	u.waitText("The token, shown once")
	copies("token-secret")
}
