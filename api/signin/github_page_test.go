package signin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// cocoonbox login --invite CODE puts invite= in the authorize URL; the
// consent page, with no session and GitHub sign-in offered, carries it
// into the GitHub sign-in's begin with the page itself as return_to, so the
// person comes back to the consent and allows (Contract: Sign-in with
// GitHub and signup, "The consent page of a CLI or app sign-in carries an
// invite from its own URL into its GitHub sign-in"). Here the providers,
// begin and GitHub's round trip are stand-ins for package signup's
// (api/signup tests the real ones); the page and its script are real, in
// headless Chromium.
func TestConsentPageCarriesTheInviteIntoTheGitHubSignIn(t *testing.T) {
	f := newCodeFixture(t)
	mux := http.NewServeMux()
	mux.Handle("GET /cb/assets/{name}", console.Assets()) // the consent page's script and style
	session := func(r *http.Request) (Principal, bool) {
		c, err := r.Cookie("cb_session")
		return Principal{UserID: f.user.ID, UserName: "newcomer"}, err == nil && c.Value == "ok"
	}
	mux.HandleFunc("GET /cb/api/auth/providers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"github":true,"signup":true,"invite_only":true}`))
	})
	begun := make(chan map[string]string, 1)
	mux.HandleFunc("POST /cb/api/auth/github/begin", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		json.NewDecoder(r.Body).Decode(&body)
		begun <- body
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"url": "/github/authorize?return_to=" + url.QueryEscape(body["return_to"])})
	})
	// GitHub and the callback: a session, then the flow's return_to.
	mux.HandleFunc("GET /github/authorize", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "cb_session", Value: "ok", Path: "/cb/", HttpOnly: true})
		http.Redirect(w, r, r.URL.Query().Get("return_to"), http.StatusSeeOther)
	})
	callbacks := make(chan url.Values, 1)
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
	invite := "cbi_" + strings.Repeat("5e", 32)
	q := goodQuery()
	q.Set("redirect_uri", srv.URL+"/callback")
	q.Set("invite", invite)
	page := "/cb/oauth/authorize?" + q.Encode()
	if err := b.Go(ctx, srv.URL+page); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(ctx, "#github-signin"); err != nil {
		t.Fatal(err)
	}
	got := <-begun
	if got["invite"] != invite || got["return_to"] != page {
		t.Fatalf("begin got %v; want invite %s and return_to %s", got, invite, page)
	}
	if err := b.WaitFor(ctx, "the consent question", func(_, text string) bool {
		return strings.Contains(text, "Sign in the cocoonbox CLI on laptop?") && strings.Contains(text, "(newcomer)")
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(ctx, "#allow"); err != nil {
		t.Fatal(err)
	}
	if back := <-callbacks; back.Get("code") == "" || back.Get("state") != "st4te" {
		t.Fatalf("Allow went to the callback with %v", back)
	}
}

// Without GitHub sign-in (no providers route, or github false) the consent
// page offers the password form alone.
func TestConsentPageOffersNoGitHubWhenTheApiDoesNot(t *testing.T) {
	f := newCodeFixture(t)
	mux := http.NewServeMux()
	mux.Handle("GET /cb/assets/{name}", console.Assets()) // the consent page's script and style
	session := func(*http.Request) (Principal, bool) { return Principal{}, false }
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
	q.Set("redirect_uri", srv.URL+"/callback")
	b.Go(ctx, srv.URL+"/cb/oauth/authorize?"+q.Encode())
	if err := b.WaitFor(ctx, "the password form", func(_, text string) bool { return strings.Contains(text, "User name") }); err != nil {
		t.Fatal(err)
	}
	if text, _ := b.Text(ctx); strings.Contains(text, "GitHub") {
		t.Fatalf("the page offers GitHub: %q", text)
	}
}
