package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// The whole path on the built api, its GitHub pointed at a stand-in
// through api.yaml's signup.github keys and the OAuth App through the
// environment, in headless Chromium: with one seat taken, a new person
// signs in with GitHub and waits in the queue; an admin deletes the
// account on the seat (cocoonbox-api users delete beside the running api)
// and the person is admitted; their "Sign in with GitHub" on the queue page
// signs them in to the console as the account signup made.
//
// Contract: Sign-in with GitHub and signup (Must show, the browser path).
func TestANewPersonSignsUpWithGitHubWaitsAndIsAdmittedInARealBrowser(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	dir := stateDir(t)
	for _, u := range [][]string{{"boss", "--admin"}, {"alice"}} {
		if _, stderr, code := api(t, "correct horse\n", append([]string{"users", "add"}, append(u, "--state-dir", dir)...)...); code != 0 {
			t.Fatalf("users add %s: %s", u[0], stderr)
		}
	}
	addr := freeAddr(t)
	conf := filepath.Join(t.TempDir(), "api.yaml")
	os.WriteFile(conf, []byte("oauth:\n  public_url: http://"+addr+"\nsignup:\n  github:\n    web_url: "+gh.WebURL+"\n    api_url: "+gh.APIURL+"\n    ca_file: "+gh.CAFile+"\n"), 0o644)
	s := startServeEnv(t, dir, addr, []string{"LOGIN_GITHUB_CLIENT_ID=" + gh.ClientID, "LOGIN_GITHUB_CLIENT_SECRET=" + gh.ClientSecret}, "--config", conf)
	base := "http://" + addr

	jar, _ := cookiejar.New(nil)
	admin := &http.Client{Jar: jar}
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if code, out := call("POST", "/cb/api/session", `{"user":"boss","password":"correct horse"}`); code != 200 {
		t.Fatalf("admin sign-in: %d %s", code, out)
	}
	if code, out := call("PUT", "/cb/api/signup", `{"enabled":true,"invite_only":false,"seats":1}`); code != 200 {
		t.Fatalf("open signup: %d %s", code, out)
	}
	if code, out := call("GET", "/cb/api/auth/providers", ""); code != 200 || out != "{\"github\":true,\"signup\":true,\"invite_only\":false}\n" {
		t.Fatalf("providers: %d %s", code, out)
	}

	gh.SignInAs(githubtest.Verified(9009, "New.Comer", "newcomer@example.com"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := webdriver.StartWith(ctx, "--ignore-certificate-errors-spki-list="+gh.SPKI)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, s.stderr)
		}
	}
	step("open the console", b.Go(ctx, base+"/cb/"))
	step("click Sign in with GitHub", b.Click(ctx, "#github-signin"))
	step("in the queue", b.WaitFor(ctx, "the queue page", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/queue") && strings.Contains(text, "Place 1 of 1 waiting") && strings.Contains(text, "newcomer@example.com")
	}))
	if _, stderr, code := api(t, "", "users", "delete", "alice", "--confirm", "--state-dir", dir); code != 0 {
		t.Fatalf("users delete alice: %s", stderr)
	}
	step("admitted", b.WaitFor(ctx, "the admitted page", func(_, text string) bool { return strings.Contains(text, "You're in.") }))
	step("sign in from the queue page", b.Click(ctx, "#signin"))
	step("signed in", b.WaitFor(ctx, "the console's home", func(url, text string) bool {
		return url == base+"/cb/" && strings.Contains(text, "Hello, new-comer")
	}))
	if gh.Live() != 0 || len(gh.Revoked()) != 2 {
		t.Errorf("GitHub tokens: %d live, %d revoked; want every one dropped", gh.Live(), len(gh.Revoked()))
	}
}
