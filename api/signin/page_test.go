package signin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// The consent page's script in real headless Chromium: with no session it
// shows the sign-in form, signs in through POST /cb/api/session (here a
// stand-in for the console's, which sets the cookie), asks "Sign in the
// cocoonbox CLI on laptop?", and on Allow goes to the callback with code,
// state and iss; on Deny with access_denied. The whole CLI flow against the
// real console is api/e2e/cli's.
func TestConsentPageInChromium(t *testing.T) {
	f := newCodeFixture(t)
	mux := http.NewServeMux()
	mux.Handle("GET /cb/assets/{name}", console.Assets()) // the consent page's script and style
	session := func(r *http.Request) (Principal, bool) {
		c, err := r.Cookie("cb_session")
		return Principal{UserID: f.user.ID, UserName: "alice"}, err == nil && c.Value == "ok"
	}
	mux.HandleFunc("POST /cb/api/session", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "cb_session", Value: "ok", Path: "/cb/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		w.WriteHeader(http.StatusNoContent)
	})
	callbacks := make(chan url.Values, 2)
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		callbacks <- r.URL.Query()
		w.Write([]byte("back at the client"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	NewHandler(f.store, srv.URL, session, nil, slog.New(slog.DiscardHandler)).Mount(mux)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	q := goodQuery()
	q.Set("redirect_uri", srv.URL+"/callback") // httptest listens on 127.0.0.1
	if err := b.Go(ctx, srv.URL+"/cb/oauth/authorize?"+q.Encode()); err != nil {
		t.Fatal(err)
	}
	if err := b.Type(ctx, "#user", "alice"); err != nil {
		t.Fatal(err)
	}
	b.Type(ctx, "#password", "a long enough password")
	b.Click(ctx, "#signin-submit")
	if err := b.WaitFor(ctx, "the consent question", func(_, text string) bool {
		return strings.Contains(text, "Sign in the cocoonbox CLI on laptop?") && strings.Contains(text, "(alice)")
	}); err != nil {
		t.Fatal(err)
	}
	if png, err := b.Screenshot(ctx); err == nil && os.Getenv("COCOONBOX_SCREENSHOTS") != "" {
		os.WriteFile(os.Getenv("COCOONBOX_SCREENSHOTS")+"/consent.png", png, 0o644)
	}
	if err := b.Click(ctx, "#allow"); err != nil {
		t.Fatal(err)
	}
	got := <-callbacks
	if got.Get("code") == "" || got.Get("state") != "st4te" || got.Get("iss") != srv.URL {
		t.Fatalf("Allow went to the callback with %v", got)
	}

	// Deny, with the session kept from before.
	b.Go(ctx, srv.URL+"/cb/oauth/authorize?"+q.Encode())
	// The buttons are hidden until the page's check answers: a click
	// before it met a hidden button on a loaded host.
	if err := b.WaitFor(ctx, "the consent question again", func(_, text string) bool {
		return strings.Contains(text, "Sign in the cocoonbox CLI on laptop?")
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(ctx, "#deny"); err != nil {
		t.Fatal(err)
	}
	got = <-callbacks
	if got.Get("error") != client.ErrAccessDenied || got.Get("code") != "" || got.Get("state") != "st4te" {
		t.Fatalf("Deny went to the callback with %v", got)
	}
}
