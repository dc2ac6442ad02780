package signup_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// The queue page and the admin page in a real headless Chromium: a person
// signs in with GitHub (the stand-in) and, no seat free, sees their place; an admin signs in, sees them, admits them past
// the cap, makes an invite (its link shown once), mints an invite-scoped
// token and saves a setting; the person's page then says they are in, and
// a second person, signed in with GitHub once the admin signed out, leaves
// the queue from theirs. COCOONBOX_SIGNUP_SHOTS=DIR
// keeps screenshots.
func TestTheQueueAndAdminPagesInARealBrowser(t *testing.T) {
	e := newQueueEnvWithGitHub(t)
	e.open(0, 100)
	if _, err := e.users.Add(e.ctx, "boss", "correct horse", true); err != nil {
		t.Fatal(err)
	}
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
	shot := func(name string) {
		if dir := os.Getenv("COCOONBOX_SIGNUP_SHOTS"); dir != "" {
			if png, err := b.Screenshot(ctx); err == nil {
				os.WriteFile(dir+"/"+name+".png", png, 0o644)
			}
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
	e.gh.SignInAs(githubtest.Verified(1001, "Person1", "p1@example.com"))
	step("the sign-in page", b.Go(ctx, e.url+"/cb/"))
	step("sign in with GitHub", b.Click(ctx, "#github-signin"))
	step("the place shown", b.WaitFor(ctx, "the queue page", has("Place 1 of 1 waiting", "p1@example.com")))
	q := e.queued(1001)
	shot("queue")

	step("the admin page without a session", b.Go(ctx, e.url+"/cb/admin"))
	step("type the admin", b.Type(ctx, "#user", "boss"))
	step("type the password", b.Type(ctx, "#password", "correct horse"))
	step("sign in", b.Click(ctx, "#signin-submit"))
	step("the admin page", b.WaitFor(ctx, "the admin page with the queue", has("No seats", "0 accounts hold seats", "Person1", "p1@example.com")))
	shot("admin")
	step("admit past the cap", b.Click(ctx, `button[data-action="admit"][data-login="Person1"]`))
	step("admitted", b.WaitFor(ctx, "the admitted entry", has("No seats", "1 account holds a seat", "admitted", "person1")))
	if n := e.count("SELECT count(*) FROM users WHERE id = $1", q); n != 1 {
		t.Fatal("the page's admit made no account")
	}
	step("create an invite", b.Click(ctx, "#invite-create"))
	step("the link once", b.WaitFor(ctx, "the invite's link", has("/cb/?invite=cbi_", "0 of 1")))
	step("type a label", b.Type(ctx, "#token-label", "the bot"))
	step("mint a token", b.Click(ctx, "#token-create"))
	step("the token once", b.WaitFor(ctx, "the token", has("cbit_", "the bot")))
	step("seats", b.Type(ctx, "#seats", "5"))
	step("save", b.Click(ctx, "#save"))
	step("saved", b.WaitFor(ctx, "the saved settings", has("Saved.", "1 of 5 seats used")))
	if n := e.count("SELECT seats FROM signup_settings"); n != 5 {
		t.Fatalf("seats %d after the page saved 5", n)
	}
	shot("admin-after")

	step("the person's page", b.Go(ctx, e.url+"/cb/queue"))
	step("in", b.WaitFor(ctx, "the admitted page", has("You're in")))
	e.exec("UPDATE signup_settings SET seats = 0")
	step("the console", b.Go(ctx, e.url+"/cb/"))
	step("sign the admin out", b.Click(ctx, "#signout"))
	step("signed out", b.WaitFor(ctx, "the sign-in page", has("Sign in with GitHub")))
	e.gh.SignInAs(githubtest.Verified(1002, "Person2", "p2@example.com"))
	step("sign in with GitHub again", b.Click(ctx, "#github-signin"))
	step("the place", b.WaitFor(ctx, "the queue page", has("Place 1 of 1 waiting", "p2@example.com")))
	other := e.queued(1002)
	step("leave", b.Click(ctx, "#leave"))
	step("confirm leaving", b.Click(ctx, "#confirm-ok"))
	step("left", b.WaitFor(ctx, "the page after leaving", has("not in the queue")))
	if n := e.count("SELECT count(*) FROM signup_queue WHERE id = $1", other); n != 0 {
		t.Fatal("the entry is still there after leaving")
	}
}

// The console's home lists the admin page for admins only; a user deletes
// their own account from the account page (a wrong name told on the page),
// and the browser is signed out; an admin's account page offers no delete.
func TestTheAccountPageDeletesAnAccountAndOnlyAdminsSeeTheAdminPage(t *testing.T) {
	e := newQueueEnv(t)
	if _, err := e.users.Add(e.ctx, "alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.users.Add(e.ctx, "boss", "correct horse", true); err != nil {
		t.Fatal(err)
	}
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
	signIn := func(name string) {
		step("the sign-in page", b.Go(ctx, e.url+"/cb/"))
		step("type the user", b.Type(ctx, "#user", name))
		step("type the password", b.Type(ctx, "#password", "correct horse"))
		step("sign in", b.Click(ctx, "#signin-submit"))
		step("home", b.WaitFor(ctx, "the home page", func(_, text string) bool { return strings.Contains(text, "Hello, "+name) }))
	}
	signIn("boss")
	text, _ := b.Text(ctx)
	if !strings.Contains(text, "Admin") || !strings.Contains(text, "Your account") {
		t.Fatalf("an admin's home: %q", text)
	}
	step("the admin's account page", b.Go(ctx, e.url+"/cb/account"))
	step("no delete for an admin", b.WaitFor(ctx, "the admin's account page", func(_, text string) bool {
		return strings.Contains(text, "not deleted from the console") && !strings.Contains(text, "Delete my account")
	}))
	step("sign out", b.Go(ctx, e.url+"/cb/"))
	step("sign out", b.Click(ctx, "#signout"))
	step("signed out", b.WaitFor(ctx, "the sign-in page", func(_, text string) bool { return strings.Contains(text, "Sign in to cocoonbox") }))

	signIn("alice")
	text, _ = b.Text(ctx)
	if strings.Contains(text, "Admin") || !strings.Contains(text, "Your account") {
		t.Fatalf("a user's home: %q", text)
	}
	step("the account page", b.Go(ctx, e.url+"/cb/account"))
	step("a wrong name", b.Type(ctx, "#name", "boss"))
	step("delete", b.Click(ctx, "#delete-submit"))
	step("refused on the page", b.WaitFor(ctx, "the refusal", func(_, text string) bool { return strings.Contains(text, "type your own user name") }))
	step("the account page again", b.Go(ctx, e.url+"/cb/account"))
	step("the right name", b.Type(ctx, "#name", "alice"))
	step("delete", b.Click(ctx, "#delete-submit"))
	step("confirm the delete", b.Click(ctx, "#confirm-ok"))
	step("signed out", b.WaitFor(ctx, "the sign-in page", func(_, text string) bool { return strings.Contains(text, "Sign in to cocoonbox") }))
	if n := e.count("SELECT count(*) FROM users WHERE name = 'alice'"); n != 0 {
		t.Fatal("alice's account is still there")
	}
}
