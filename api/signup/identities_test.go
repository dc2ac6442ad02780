package signup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"

	"github.com/cocoonbox/cocoonbox/api/signup"
)

// passwordSignIn signs c in to the console with a password account.
func (e *env) passwordSignIn(c *http.Client, name string) {
	e.t.Helper()
	if resp, text := e.do(c, "POST", "/cb/api/session", `{"user":"`+name+`","password":"correct horse"}`); resp.StatusCode != 200 {
		e.t.Fatalf("password sign-in of %s: %d %s", name, resp.StatusCode, text)
	}
}

// connect runs a connect in c as GitHub account a and answers the callback's answer.
func (e *env) connect(c *http.Client, a githubtest.Account) (*http.Response, string) {
	e.t.Helper()
	resp, text := e.do(c, "POST", "/cb/api/me/identities/github", `{}`)
	if resp.StatusCode != 200 {
		e.t.Fatalf("connect: %d %s", resp.StatusCode, text)
	}
	var ans signup.BeginAnswer
	json.Unmarshal([]byte(text), &ans)
	if q := mustURL(ans.URL).Query(); q.Get("prompt") != "select_account" || q.Get("scope") != "user:email" {
		e.t.Fatalf("connect's authorize URL %s: want GitHub's account picker", ans.URL)
	}
	e.gh.SignInAs(a)
	return e.do(c, "GET", e.atGitHub(ans.URL), "")
}

func (e *env) identities(c *http.Client) signup.IdentitiesAnswer {
	e.t.Helper()
	resp, text := e.do(c, "GET", "/cb/api/me/identities", "")
	var ans signup.IdentitiesAnswer
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &ans) != nil {
		e.t.Fatalf("identities: %d %s", resp.StatusCode, text)
	}
	return ans
}

// A signed-in user connects a GitHub account through GitHub's consent;
// the account then signs them in, its waiting queue entry is gone; one
// taken by another user is github_taken, a second one github_linked;
// disconnecting is 204, then 404, and 409 for an account made through GitHub.
func TestConnectAndDisconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if resp, _ := e.do(e.browser(), "POST", "/cb/api/me/identities/github", `{}`); resp.StatusCode != 401 {
		t.Fatalf("connect without a session: %d", resp.StatusCode)
	}
	// The GitHub account waits in the queue, as a signup before.
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO signup_queue (idp, subject, login, email, email_verified) VALUES ('github', '4004', 'alice-gh', 'a@example.com', true)`); err != nil {
		t.Fatal(err)
	}
	alice := e.browser()
	e.passwordSignIn(alice, "alice")
	if ans := e.identities(alice); len(ans.Identities) != 0 || ans.MadeBy != "" || !ans.GitHub {
		t.Fatalf("before: %+v", ans)
	}
	resp, text := e.connect(alice, githubtest.Verified(4004, "alice-gh", "a@example.com"))
	if onward(resp, text) != "/cb/identities" {
		t.Fatalf("connect callback: %d %s", resp.StatusCode, text)
	}
	ans := e.identities(alice)
	if len(ans.Identities) != 1 || ans.Identities[0].Subject != "4004" || ans.Identities[0].Login != "alice-gh" {
		t.Fatalf("after the connect: %+v", ans)
	}
	if n := e.count("SELECT count(*) FROM signup_queue WHERE subject = '4004'"); n != 0 {
		t.Error("the connected account's waiting queue entry stays")
	}
	if e.gh.Live() != 0 {
		t.Error("the connect left GitHub's token live")
	}
	// The GitHub account now signs alice in, in a browser with no session.
	fresh := e.browser()
	if resp, text := e.signInWithGitHub(fresh, githubtest.Verified(4004, "alice-gh", "a@example.com"), "/cb/", ""); onward(resp, text) != "/cb/" || e.me(fresh) != "alice" {
		t.Fatalf("sign-in with the connected account: %d %s", resp.StatusCode, text)
	}
	// Connecting it again is no error.
	if resp, text := e.connect(alice, githubtest.Verified(4004, "alice-gh", "a@example.com")); onward(resp, text) != "/cb/identities" {
		t.Fatalf("connect again: %d %s", resp.StatusCode, text)
	}

	bob := e.browser()
	e.passwordSignIn(bob, "bob")
	if resp, _ := e.connect(bob, githubtest.Verified(4004, "alice-gh", "a@example.com")); loginError(t, resp) != signup.ErrGitHubTaken {
		t.Fatalf("bob connects alice's GitHub account: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := e.connect(alice, githubtest.Verified(5005, "alice-other", "a2@example.com")); loginError(t, resp) != signup.ErrGitHubLinked {
		t.Fatalf("alice connects a second GitHub account: %d %v", resp.StatusCode, resp.Header)
	}
	if n := e.count("SELECT count(*) FROM identities"); n != 1 {
		t.Fatalf("%d identities after the refusals", n)
	}

	if resp, text := e.do(alice, "DELETE", "/cb/api/me/identities/github", ""); resp.StatusCode != 204 {
		t.Fatalf("disconnect: %d %s", resp.StatusCode, text)
	}
	if resp, _ := e.do(alice, "DELETE", "/cb/api/me/identities/github", ""); resp.StatusCode != 404 {
		t.Fatalf("disconnect again: %d", resp.StatusCode)
	}
	if resp, _ := e.signInWithGitHub(e.browser(), githubtest.Verified(4004, "alice-gh", "a@example.com"), "/cb/", ""); loginError(t, resp) != signup.ErrSignupClosed {
		t.Fatal("the disconnected account still signs alice in")
	}

	// An account made through GitHub keeps its identity: 409.
	var dave string
	if err := e.db.Pool.QueryRow(ctx, "INSERT INTO users (name, idp) VALUES ('dave', 'github') RETURNING id").Scan(&dave); err != nil {
		t.Fatal(err)
	}
	e.link("6006", dave)
	d := e.browser()
	if resp, text := e.signInWithGitHub(d, githubtest.Verified(6006, "dave", "d@example.com"), "/cb/", ""); onward(resp, text) != "/cb/" {
		t.Fatalf("dave's sign-in: %d %s", resp.StatusCode, text)
	}
	if ans := e.identities(d); ans.MadeBy != "github" || len(ans.Identities) != 1 {
		t.Fatalf("dave's identities: %+v", ans)
	}
	if resp, text := e.do(d, "DELETE", "/cb/api/me/identities/github", ""); resp.StatusCode != 409 {
		t.Fatalf("disconnect of an account made through GitHub: %d %s; want 409", resp.StatusCode, text)
	}
	if n := e.count("SELECT count(*) FROM identities WHERE user_id = $1", dave); n != 1 {
		t.Fatal("the 409 removed the identity")
	}
	// And its password sign-in is refused, whatever is typed.
	if resp, _ := e.do(e.browser(), "POST", "/cb/api/session", `{"user":"dave","password":"correct horse"}`); resp.StatusCode != 401 {
		t.Fatalf("password sign-in of an account made through GitHub: %d", resp.StatusCode)
	}
}
