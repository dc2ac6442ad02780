package signup

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/ratelimit"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// pathEnv is one api wired as cmd/cocoonbox-api wires it: the console,
// GitHub sign-in against the stand-in (handing unknown identities to the
// real Arrive), signup mounted behind its token check, the token index's
// changes triggering admission and Run going.
type pathEnv struct {
	*qenv
	gh *githubtest.Server
}

func newPathEnv(t *testing.T) *pathEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := dbtest.New(t, users.Schema, console.Schema, ratelimit.Schema, Schema)
	e := &pathEnv{qenv: &qenv{t: t, db: db, ctx: context.Background()}, gh: githubtest.New(t)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.users = users.NewStore(db.Pool)
	e.users.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	ix := tokens.NewIndex(db.Pool, db.URL, log)
	con := console.New(console.Deps{Pool: db.Pool, Users: e.users, Tokens: tokens.NewStore(db.Pool, ix), Log: log,
		SignIn: console.SignInLimits{PerUser: 100, PerAddress: 100, Window: time.Minute}})
	e.s = New(Deps{Pool: db.Pool, Log: log, Session: con.Session, ClearSession: con.ClearCookie, DeleteUser: e.users.Delete})
	srv := server.New(log, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e.url = ts.URL
	app := GitHubApp{ClientID: e.gh.ClientID, Secret: Secret(e.gh.ClientSecret), WebURL: e.gh.WebURL, APIURL: e.gh.APIURL, Roots: roots(t, e.gh.CAFile)}
	g, err := NewGitHub(GitHubDeps{Pool: db.Pool, App: app, PublicURL: ts.URL, Session: con.Session, StartSession: con.StartSession,
		Arrive: e.s.Arrive, SetQueueCookie: e.s.SetQueueCookie, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	con.Mount(srv)
	g.Mount(srv)
	con.OfferGitHub()
	e.s.Mount(srv)
	srv.Wrap(e.s.GuardInviteTokens)
	ix.OnChange(func(string) { e.s.Trigger() })
	if err := ix.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Stop)
	go e.s.Run(ctx)
	return e
}

// The whole browser path in headless Chromium (Must show): a new person
// signs in with GitHub, waits in the queue (every seat taken), is admitted
// when an admin deletes another account, and is signed in by the queue
// page's GitHub sign-in. Then, with signup invite-only, a second person
// without an invite is refused, and with an invite link gets past it.
func TestANewPersonWaitsIsAdmittedWhenASeatFreesAndIsSignedIn(t *testing.T) {
	e := newPathEnv(t)
	if _, err := e.users.Add(e.ctx, "alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	e.open(1, 50) // alice holds the one seat
	e.gh.SignInAs(githubtest.Verified(2001, "New-Person", "new@example.com"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
	has := func(subs ...string) func(string, string) bool {
		return func(_, text string) bool {
			for _, s := range subs {
				if !strings.Contains(text, s) {
					return false
				}
			}
			return true
		}
	}
	step("the sign-in page", b.Go(ctx, e.url+"/cb/"))
	step("sign in with GitHub", b.Click(ctx, "#github-signin"))
	step("in the queue", b.WaitFor(ctx, "the queue page", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/queue") && strings.Contains(text, "Place 1 of 1 waiting") && strings.Contains(text, "new@example.com")
	}))
	if n := e.count("SELECT count(*) FROM users WHERE idp = 'github'"); n != 0 {
		t.Fatalf("%d accounts made past the seats", n)
	}
	// The admin delete (cocoonbox-api users delete's store call, on the
	// database alone): the api hears it and admits.
	if err := e.users.Delete(e.ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	step("admitted, as the page sees on its own", b.WaitFor(ctx, "the admitted page", has("You're in")))
	step("sign in from the queue page", b.Click(ctx, "#signin"))
	step("signed in", b.WaitFor(ctx, "the console's home", has("Hello, new-person")))

	// Invite-only: no invite is refused; an invite link lets the next in.
	e.exec("UPDATE signup_settings SET invite_only = true, seats = 10")
	step("sign out", b.Click(ctx, "#signout"))
	step("signed out", b.WaitFor(ctx, "the sign-in page", has("Sign in with GitHub")))
	e.gh.SignInAs(githubtest.Verified(2002, "second", "second@example.com"))
	step("sign in with GitHub, no invite", b.Click(ctx, "#github-signin"))
	step("refused", b.WaitFor(ctx, "invite_required", func(url, text string) bool {
		return strings.Contains(url, "login_error=invite_required") && strings.Contains(text, "Signup is by invite only")
	}))
	inv, err := e.s.CreateInvite(e.ctx, "", "", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	step("the invite link", b.Go(ctx, e.url+inv.Link))
	step("sign in with GitHub, the invite along", b.Click(ctx, "#github-signin"))
	step("signed in", b.WaitFor(ctx, "the console's home", has("Hello, second")))
	if n := e.count("SELECT used FROM invites WHERE id::text = $1", inv.ID); n != 1 {
		t.Fatalf("the invite's used is %d", n)
	}
}
