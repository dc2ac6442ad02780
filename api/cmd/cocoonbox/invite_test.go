package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// inviteAPI is the api (apitest: signup's handlers and the token check
// around the mux, on real PostgreSQL) and an admin's invite-scoped token.
func inviteAPI(t *testing.T) (url, token string) {
	t.Helper()
	a := apitest.New(t)
	admin := a.AddUser("boss", true)
	tok, err := a.Signup.MintInviteToken(context.Background(), admin.ID, "the CLI test")
	if err != nil {
		t.Fatal(err)
	}
	return a.URL, tok.Token
}

// cocoonbox invite create and list with the token from the environment or
// a file: the link, one use, the days asked for; never from argv.
func TestInviteCreateAndListWithTheTokenFromTheEnvironmentOrAFile(t *testing.T) {
	url, token := inviteAPI(t)
	t.Setenv("COCOONBOX_INVITE_TOKEN", token)
	out, err := runCLI(t, "", "invite", "create", "--endpoint", url)
	if err != nil || !strings.HasPrefix(out, url+"/cb/?invite=cbi_") || !strings.Contains(out, "one use") {
		t.Fatalf("invite create: %q, %v", out, err)
	}
	code := strings.Fields(out)[0][len(url+"/cb/?invite="):]
	if len(code) != 68 {
		t.Fatalf("the code %q", code)
	}
	out, err = runCLI(t, "", "invite", "create", "--days", "7", "--json", "--endpoint", url)
	if err != nil || !strings.Contains(out, `"uses":1`) {
		t.Fatalf("invite create --days 7 --json: %q, %v", out, err)
	}
	t.Setenv("COCOONBOX_INVITE_TOKEN", "")
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte(token+"\n"), 0o600)
	out, err = runCLI(t, "", "invite", "list", "--token-file", file, "--endpoint", url)
	if err != nil || strings.Count(out, " of 1 ") != 2 || !strings.Contains(out, "live") {
		t.Fatalf("invite list --token-file: %q, %v", out, err)
	}
	t.Setenv("COCOONBOX_INVITE_TOKEN_FILE", file)
	if out, err = runCLI(t, "", "invite", "list", "--endpoint", url); err != nil || strings.Count(out, "live") != 2 {
		t.Fatalf("invite list with COCOONBOX_INVITE_TOKEN_FILE: %q, %v", out, err)
	}
	if strings.Contains(out, code) {
		t.Fatal("the list shows a code")
	}
}

// Bad input, each refused before the api or by it, never echoing the token.
func TestInviteRefusesBadInputWithoutSayingTheToken(t *testing.T) {
	url, token := inviteAPI(t)
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("cb_"+strings.Repeat("a", 64)), 0o600)
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{token, []string{"invite"}, "unknown flag: --endpoint"},
		{token, []string{"invite", "revoke"}, `unknown flag: --endpoint`},
		{token, []string{"invite", "create", token}, "never taken from the command line"},
		{token, []string{"invite", "create", "--token", token}, "token"},
		{token, []string{"invite", "create", "--days", "8"}, "days is 1 to 7"},
		{token, []string{"invite", "create", "--days", "0"}, "days is 1 to 7"},
		{"", []string{"invite", "list"}, "no invite-scoped token"},
		{"", []string{"invite", "list", "--token-file", bad}, "does not hold an invite-scoped token"},
		{"", []string{"invite", "list", "--token-file", bad + "-none"}, "no such file"},
		{"cbit_" + strings.Repeat("0", 64), []string{"invite", "list"}, "refused the invite-scoped token"},
		{"cbit_" + strings.ToUpper(token[5:]), []string{"invite", "list"}, "does not hold"},
	} {
		t.Setenv("COCOONBOX_INVITE_TOKEN", c.env)
		_, err := runCLI(t, "", append(c.args, "--endpoint", url)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), token[5:]) {
			t.Errorf("%v: the error carries the token", c.args)
		}
	}
}
