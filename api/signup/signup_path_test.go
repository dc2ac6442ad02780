package signup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// pathEnv is the api as the product builds it (apitest.New): the console,
// GitHub sign-in against the stand-in (handing unknown identities to
// signup's Arrive), signup behind its token check, the token index's
// changes triggering admission and Run going; alice signed out.
type pathEnv struct {
	*apitest.API
	t   *testing.T
	ctx context.Context
	gh  *githubtest.Server
}

func newPathEnv(t *testing.T) *pathEnv {
	t.Helper()
	gh := githubtest.New(t)
	return &pathEnv{API: apitest.New(t, apitest.WithoutSession(), apitest.WithGitHub(gh)), t: t, ctx: context.Background(), gh: gh}
}

// exec runs SQL on the api's database.
func (e *pathEnv) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.DB.Pool.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *pathEnv) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.DB.Pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// The whole browser path in headless Chromium (Must show): a new person
// signs in with GitHub, waits in the queue (every seat taken), is admitted
// when an admin deletes another account, and is signed in by the queue
// page's GitHub sign-in. Then, with signup invite-only, a second person
// without an invite is refused, and with an invite link gets past it.
func TestANewPersonWaitsIsAdmittedWhenASeatFreesAndIsSignedIn(t *testing.T) {
	e := newPathEnv(t) // alice holds the one seat
	e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = 1, hourly_accounts = 50")
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
	step("the sign-in page", b.Go(ctx, e.URL+"/cb/"))
	step("sign in with GitHub", b.Click(ctx, "#github-signin"))
	step("in the queue", b.WaitFor(ctx, "the queue page", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/queue") && strings.Contains(text, "Place 1 of 1 waiting") && strings.Contains(text, "new@example.com")
	}))
	if n := e.count("SELECT count(*) FROM users WHERE idp = 'github'"); n != 0 {
		t.Fatalf("%d accounts made past the seats", n)
	}
	// The admin delete (cocoonbox-api users delete's store call, on the
	// database alone): the api hears it and admits.
	if err := e.Users.Delete(e.ctx, "alice"); err != nil {
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
	inv, err := e.Signup.CreateInvite(e.ctx, "", "", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	step("the invite link", b.Go(ctx, e.URL+inv.Link))
	step("sign in with GitHub, the invite along", b.Click(ctx, "#github-signin"))
	step("signed in", b.WaitFor(ctx, "the console's home", has("Hello, second")))
	if n := e.count("SELECT used FROM invites WHERE id::text = $1", inv.ID); n != 1 {
		t.Fatalf("the invite's used is %d", n)
	}
}

// A user disabled or deleted anywhere (here by the store, as the admin CLI
// does, on the database alone) reaches every api through the token index's
// NOTIFY; the api's Run admits on it.
func TestAUserDisabledOrDeletedElsewhereAdmitsTheNext(t *testing.T) {
	e := newPathEnv(t) // alice holds the one seat
	e.exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = 1, hourly_accounts = 100")
	var queued []string
	for n := 1; n <= 2; n++ {
		out, err := e.Signup.Arrive(e.ctx, signup.Arrival{IdP: "github", Subject: fmt.Sprint(1000 + n), Login: fmt.Sprintf("Person%d", n),
			Email: fmt.Sprintf("p%d@example.com", n), EmailVerified: true})
		if err != nil || out.QueueID == "" {
			t.Fatalf("person %d arrives: %+v, %v; want a place in the queue", n, out, err)
		}
		queued = append(queued, out.QueueID)
	}
	admitted := func(id string) func() (bool, string) {
		return func() (bool, string) {
			n := e.count("SELECT count(*) FROM signup_queue WHERE id = $1 AND status = 'admitted'", id)
			return n == 1, fmt.Sprintf("%d seats used", e.count("SELECT count(*) FROM users WHERE NOT admin AND disabled_at IS NULL"))
		}
	}
	if _, err := e.Users.SetDisabled(e.ctx, e.User.Name, true); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the first admitted after alice's disable", admitted(queued[0]))
	var name string
	if err := e.DB.Pool.QueryRow(e.ctx, "SELECT name FROM users WHERE id = $1", queued[0]).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if err := e.Users.Delete(e.ctx, name); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the second admitted after the first's delete", admitted(queued[1]))
}
