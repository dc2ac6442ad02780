package shares_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Issue 43, Deliver 5 and Must show: the api restarted while a screen is
// open. Real Chromium holds the owner's screen page, then the share page;
// the api stops under it (its calls end, its listener closes) and the page
// says it is reconnecting, and once an api is back on the same address and
// database the page opens the screen again by itself, no reload. Before,
// the owner's page took the api's stop for the end of the console session
// (4401: "sign in again") and neither page reopened anything.
func TestTheScreenPagesReconnectAfterTheAPIRestarts(t *testing.T) {
	w, box, ctx, b := chromiumWorld(t)
	_, secret := w.create(t, false)
	addr := strings.TrimPrefix(w.a.URL, "http://")

	w.signInBrowser(t, ctx, b)

	api := w.a
	restart := func(page, connected string) {
		t.Helper()
		if err := b.WaitFor(ctx, page+" open", func(_, text string) bool { return strings.Contains(text, connected) }); err != nil {
			t.Fatal(err)
		}
		opened, _, _, _ := box.state()
		api.Stop()
		if err := b.WaitFor(ctx, page+" reconnecting", func(_, text string) bool { return strings.Contains(text, "Reconnecting in") }); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, time.Minute, "the stopped api's viewer gone from the box", func() (bool, string) {
			o, e, _, _ := box.state()
			return o == e, fmt.Sprintf("%d opened, %d ended", o, e)
		})
		api = apitest.New(t, apitest.WithDatabaseOf(w.a), apitest.WithAddress(addr), apitest.WithSupervisor("host1", w.host))
		if err := b.WaitFor(ctx, page+" open again", func(_, text string) bool { return strings.Contains(text, connected) }); err != nil {
			t.Fatal(err)
		}
		if o, _, _, _ := box.state(); o <= opened {
			t.Errorf("%s: the box served %d viewers after the restart, want more than %d", page, o, opened)
		}
	}
	if err := b.Go(ctx, w.a.URL+"/cb/boxes/desk/screen"); err != nil {
		t.Fatal(err)
	}
	restart("the owner's screen page", "The screen of desk.")
	if err := b.Go(ctx, w.a.URL+shares.PagePath+"#"+secret); err != nil {
		t.Fatal(err)
	}
	restart("the share page", "A shared screen.")
}

// signInBrowser gives b alice's console session: her signed-in client's
// cookie. The session is a row of the database, so an api that takes over
// the database knows it too.
func (w *world) signInBrowser(t *testing.T, ctx context.Context, b *webdriver.Browser) {
	t.Helper()
	u, _ := url.Parse(w.a.URL + "/cb/")
	var cookie *http.Cookie
	for _, c := range w.a.Session.Client.Jar.Cookies(u) {
		if c.Name == console.CookieName {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("alice's client has no console session cookie")
	}
	if err := b.Go(ctx, w.a.URL+"/cb/"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCookie(ctx, &http.Cookie{Name: cookie.Name, Value: cookie.Value, Path: "/cb/", HttpOnly: true, SameSite: http.SameSiteStrictMode}); err != nil {
		t.Fatal(err)
	}
}

// Issue 43, Deliver 3 and 5: a box hibernated under the owner's open
// screen page: the page says the box is not running and does not
// reconnect (4409 is final: the screen does not wake a box). The share
// page's 4409 is TestAViewerOfABoxHibernatedUnderItIsClosed's.
func TestTheScreenPageSaysTheBoxWasHibernated(t *testing.T) {
	w, box, ctx, b := chromiumWorld(t)
	w.signInBrowser(t, ctx, b)
	if err := b.Go(ctx, w.a.URL+"/cb/boxes/desk/screen"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(ctx, "the owner's screen", func(_, text string) bool { return strings.Contains(text, "The screen of desk.") }); err != nil {
		t.Fatal(err)
	}
	w.hibernate(t, string(w.a.PersonalToken(w.a.User.ID)))
	wait.Eventually(t, time.Minute, "the viewer gone from the box", func() (bool, string) {
		o, e, _, _ := box.state()
		return o == e, fmt.Sprintf("%d opened, %d ended", o, e)
	})
	if err := b.WaitFor(ctx, "the page after the hibernate", func(_, text string) bool {
		return strings.Contains(text, "The box is not running") && !strings.Contains(text, "Reconnecting")
	}); err != nil {
		t.Error(err)
	}
	if o, _, _, _ := box.state(); o != 1 {
		t.Errorf("the box served %d viewers, want 1: the page reconnected to a hibernated box", o)
	}
}

// chromiumWorld is newWorld with rfbServer as the box's VNC and real
// Chromium (a profile of its own) for the test's 4 minutes.
func chromiumWorld(t *testing.T) (*world, *rfbServer, context.Context, *webdriver.Browser) {
	t.Helper()
	w := newWorld(t)
	box := &rfbServer{}
	ctx, b := chromium(t, w, box)
	return w, box, ctx, b
}
