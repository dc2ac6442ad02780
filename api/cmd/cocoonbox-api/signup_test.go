package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An invite-scoped token (cbit_) on the built api reaches POST and GET
// /cb/api/invites only: every other route of the api's one HTTP server
// (the console, the control MCP, gRPC, the sign-in's and OAuth's
// endpoints, the GitHub callback, routes nobody mounted) answers 403, the
// check wrapping the whole mux.
//
// Contract: Sign-in with GitHub and signup, "Invite-scoped tokens".
func TestAnInviteScopedTokenReachesOnlyTheInviteRoutesOfTheWholeApi(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	if _, stderr, code := api(t, "correct horse\n", "users", "add", "boss", "--admin", "--state-dir", dir); code != 0 {
		t.Fatalf("users add: %s", stderr)
	}
	addr := freeAddr(t)
	conf := filepath.Join(t.TempDir(), "api.yaml")
	os.WriteFile(conf, []byte("oauth:\n  public_url: http://"+addr+"/\n"), 0o644)
	s := startServeAt(t, dir, addr, "--config", conf)
	base := "http://" + s.addr
	jar, _ := cookiejar.New(nil)
	admin := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(c *http.Client, method, path, bearer string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	if code, out := call(admin, "POST", "/cb/api/session", "", map[string]string{"user": "boss", "password": "correct horse"}); code != 200 {
		t.Fatalf("sign in: %d %s", code, out)
	}
	code, out := call(admin, "POST", "/cb/api/invite-tokens", "", map[string]string{"label": "bot"})
	var tok struct{ Token string }
	if json.Unmarshal(out, &tok); code != 201 || !strings.HasPrefix(tok.Token, "cbit_") {
		t.Fatalf("mint: %d %s", code, out)
	}
	bot := &http.Client{CheckRedirect: admin.CheckRedirect}
	if code, out := call(bot, "POST", "/cb/api/invites", tok.Token, map[string]any{"days": 3}); code != 201 || !bytes.Contains(out, []byte(`"code":"cbi_`)) {
		t.Fatalf("the token's invite: %d %s", code, out)
	}
	if code, out := call(bot, "GET", "/cb/api/invites", tok.Token, nil); code != 200 {
		t.Fatalf("the token's list: %d %s", code, out)
	}
	for _, r := range [][2]string{
		{"GET", "/healthz"}, {"GET", "/cb/"}, {"GET", "/cb/token"}, {"GET", "/cb/api/me"}, {"POST", "/cb/api/me/token"}, {"POST", "/cb/api/session"},
		{"GET", "/cb/api/devices"}, {"GET", "/cb/api/keys"}, {"GET", "/cb/admin"}, {"GET", "/cb/api/signup"}, {"PUT", "/cb/api/signup"},
		{"GET", "/cb/api/queue"}, {"GET", "/cb/api/invite-tokens"}, {"POST", "/cb/api/invite-tokens"}, {"GET", "/cb/api/users"},
		{"POST", "/cb/api/me/delete"}, {"GET", "/cb/queue"}, {"GET", "/cb/api/queue/me"}, {"DELETE", "/cb/api/invites/x"},
		{"GET", "/cb/oauth/authorize"}, {"POST", "/cb/api/oauth/approve"}, {"POST", "/cocoonbox.oauth/token"}, {"POST", "/cocoonbox.oauth/revoke"},
		{"POST", "/cocoonbox.oauth/register"}, {"GET", "/.well-known/oauth-authorization-server"},
		{"GET", "/.well-known/oauth-protected-resource/cocoonbox.mcp/control"}, {"POST", "/cocoonbox.mcp/control"},
		{"POST", "/cocoonbox.control.v1.Boxes/List"}, {"POST", "/cocoonbox.control.v1.Account/ListDevices"},
		{"GET", "/cocoonbox.auth/callback"}, {"POST", "/cb/api/auth/github/begin"}, {"GET", "/cb/api/auth/providers"}, {"GET", "/nowhere"},
	} {
		code, out := call(bot, r[0], r[1], tok.Token, map[string]any{})
		if code != http.StatusForbidden || !bytes.Contains(out, []byte("invite_token")) {
			t.Errorf("%s %s with a cbit_ token: %d %.200s; want 403", r[0], r[1], code, out)
		}
	}
	s.stop(t)
	if strings.Contains(s.stderr.String(), tok.Token[5:]) {
		t.Error("the api's log carries the token")
	}
}
