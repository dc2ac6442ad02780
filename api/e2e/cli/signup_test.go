package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// Must show (issue 28, Deliver 4): `cocoonbox login --invite CODE` for a
// person the api does not know, with signup invite-only. The CLI's consent
// page offers GitHub, carries the invite into the GitHub sign-in (the
// stand-in, over TLS, named by api.yaml's signup.github keys and the
// LOGIN_GITHUB_* environment), signup admits the person at once (a seat is
// free), and the browser lands back on the consent in one pass; the Allow
// click stays, and the CLI is signed in as the new account.
//
// Contract: Sign-in with GitHub and signup ("The consent page of a CLI or
// app sign-in carries an invite from its own URL into its GitHub sign-in
// (cocoonbox login --invite CODE puts it there)").
func TestLoginWithAnInviteSignsANewPersonUpThroughGitHubAndBackToTheConsent(t *testing.T) {
	gh := githubtest.New(t)
	gh.SignInAs(githubtest.Verified(3001, "Newbie", "newbie@example.com"))
	t.Setenv("LOGIN_GITHUB_CLIENT_ID", gh.ClientID)
	t.Setenv("LOGIN_GITHUB_CLIENT_SECRET", gh.ClientSecret)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := dbtest.New(t)
	api, err := harness.Start(ctx, bins.API, harness.Options{StateDir: t.TempDir(), DatabaseURL: db.URL, OAuth: true,
		More: fmt.Sprintf("signup:\n  github:\n    web_url: %s\n    api_url: %s\n    ca_file: %s\n", gh.WebURL, gh.APIURL, gh.CAFile)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		api.Stop()
		if t.Failed() {
			t.Logf("api log:\n%s", api.Log())
		}
	})
	if out, err := api.Admin(ctx, password+"\n", "users", "add", "boss", "--admin"); err != nil {
		t.Fatalf("users add: %v\n%s", err, out)
	}
	admin, err := harness.SignIn(ctx, api.URL, "boss", password)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, err := admin.Do(ctx, "PUT", "/cb/api/signup", map[string]any{"enabled": true, "seats": 5}); err != nil || code != 200 {
		t.Fatalf("open signup: %d %s %v", code, out, err)
	}
	code, out, err := admin.Post(ctx, "/cb/api/invites", map[string]any{"uses": 1, "days": 1})
	var inv struct{ ID, Code string }
	if err != nil || code != 201 || json.Unmarshal([]byte(out), &inv) != nil {
		t.Fatalf("make an invite: %d %s %v", code, out, err)
	}

	b, err := webdriver.StartWith(ctx, "--ignore-certificate-errors-spki-list="+gh.SPKI)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	withGitHub := func(ctx context.Context, b *webdriver.Browser, u, _, _ string) error {
		if !strings.Contains(u, "invite="+inv.Code) {
			return fmt.Errorf("the authorize URL %s does not carry the invite", u)
		}
		if err := b.Go(ctx, u); err != nil {
			return err
		}
		if err := b.Click(ctx, "#github-signin"); err != nil {
			return err
		}
		if err := b.WaitFor(ctx, "the consent, back from GitHub", func(_, text string) bool {
			return strings.Contains(text, "Sign in the cocoonbox CLI on laptop?") && strings.Contains(text, "(newbie)")
		}); err != nil {
			return err
		}
		return b.Click(ctx, "#allow")
	}
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir()}
	out, err = cli.LoginWith(ctx, b, withGitHub, api.URL, "", "", "--invite", inv.Code, "--device-name", "laptop")
	if err != nil || !strings.Contains(out, `Signed in to `+api.URL+` as device "laptop"`) {
		t.Fatalf("cocoonbox login --invite: %v\n%s", err, out)
	}
	if out, err := api.Admin(ctx, "", "users", "list"); err != nil || !strings.Contains(out, "newbie") {
		t.Fatalf("users list: %v\n%s", err, out)
	}
	if _, out, _ := admin.Do(ctx, "GET", "/cb/api/invites", nil); !strings.Contains(out, `"used":1`) {
		t.Fatalf("the invite was not used: %s", out)
	}
	if gh.Calls("GET /login/oauth/authorize") != 1 || gh.Live() != 0 {
		t.Fatalf("GitHub saw %d authorize, %d tokens live", gh.Calls("GET /login/oauth/authorize"), gh.Live())
	}
}
