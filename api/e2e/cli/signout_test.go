package cli

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// personalToken makes the user's personal token on the console's token page.
func (e *env) personalToken(c *harness.Console) string {
	e.t.Helper()
	status, body, err := c.Post(e.ctx, "/cb/api/me/token", map[string]string{})
	if err != nil || status != http.StatusOK {
		e.t.Fatalf("make the personal token: %d %s %v", status, body, err)
	}
	i := strings.Index(body, "cb_")
	if i < 0 || len(body) < i+67 {
		e.t.Fatalf("no token in %s", body)
	}
	return body[i : i+67]
}

// signedIn is every sign-in of one user, with a stream open on each token.
type signedIn struct {
	console  *harness.Console
	tokens   []string
	streams  []<-chan error
	bobToken string
	bobEnded <-chan error
	bobSees  <-chan int
}

func (e *env) signInEverywhere() *signedIn {
	e.user("bob")
	s := &signedIn{console: e.console("alice")}
	s.tokens = []string{e.personalToken(s.console), e.device(s.console, "laptop"), e.device(s.console, "desk")}
	for _, tok := range s.tokens {
		end, _ := e.watch(e.api.URL, tok)
		s.streams = append(s.streams, end)
	}
	bob := e.console("bob")
	s.bobToken = e.device(bob, "bob's")
	s.bobEnded, s.bobSees = e.watch(e.api.URL, s.bobToken)
	return s
}

// ended checks that every sign-in of alice is over and bob's is not.
func (e *env) ended(s *signedIn) {
	e.t.Helper()
	for i, end := range s.streams {
		select {
		case err := <-end:
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				e.t.Errorf("stream %d ended with %v, want UNAUTHENTICATED", i, err)
			}
		case <-e.ctx.Done():
			e.t.Fatalf("stream %d on alice's token %d did not end", i, i)
		}
	}
	for i, tok := range s.tokens {
		if ok, saw := e.refused(e.api.URL, tok); !ok {
			e.t.Errorf("alice's token %d still works: %s", i, saw)
		}
	}
	if status, body, _ := s.console.Do(e.ctx, "GET", "/cb/api/devices", nil); status != http.StatusUnauthorized {
		e.t.Errorf("alice's console session still works: %d %s", status, body)
	}
	// Bob is untouched: his token works and his stream still sends.
	if ok, saw := e.refused(e.api.URL, s.bobToken); ok {
		e.t.Fatalf("bob's token is refused: %s", saw)
	}
	e.device(e.console("bob"), "bob's second")
	for n := 0; n != 2; {
		select {
		case n = <-s.bobSees:
		case err := <-s.bobEnded:
			e.t.Fatalf("bob's stream ended: %v", err)
		case <-e.ctx.Done():
			e.t.Fatalf("bob's stream sent no list of his 2 devices (last: %d)", n)
		}
	}
}

// Must show: sign out everywhere (the console's call) ends the console
// session, the personal token and every device token, and a stream open on
// any of them; other users are untouched.
func TestSignOutEverywhereFromTheConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInEverywhere()
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.api.URL+"/cb/api/me/sign-out-everywhere", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.console.Client.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign out everywhere: %v %v", resp, err)
	}
	if sc := resp.Header.Get("Set-Cookie"); !strings.Contains(sc, "cb_session=") || !(strings.Contains(sc, "Max-Age=0") || strings.Contains(sc, "1970")) {
		t.Fatalf("the session cookie is not cleared: %q", sc)
	}
	e.ended(s)
}

// The same through gRPC (Account.SignOutEverywhere) from one device token,
// the calling one included, and through cocoonbox logout --everywhere,
// which then forgets its token.
func TestSignOutEverywhereFromGRPCAndTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.signInEverywhere()
	if _, err := harness.Account(e.api.URL, s.tokens[1]).SignOutEverywhere(e.ctx, connect.NewRequest(&controlv1.SignOutEverywhereRequest{})); err != nil {
		t.Fatal(err)
	}
	e.ended(s)

	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir()}
	tok := e.device(e.console("alice"), "cli")
	writeLogin(t, cli, e.api.URL, tok, "browser")
	out, err := cli.Run(e.ctx, "", "logout", "--everywhere", "--endpoint", e.api.URL)
	if err != nil || !strings.Contains(out, "Signed out everywhere") {
		t.Fatalf("logout --everywhere: %v\n%s", err, out)
	}
	if ok, saw := e.refused(e.api.URL, tok); !ok {
		t.Fatalf("the CLI's token works after logout --everywhere: %s", saw)
	}
	if out, err := cli.Run(e.ctx, "", "devices", "--endpoint", e.api.URL); err == nil || !strings.Contains(out, "not signed in") {
		t.Fatalf("the CLI kept its token after logout --everywhere: %v\n%s", err, out)
	}
}
