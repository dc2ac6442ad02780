package signin

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// The whole exchange over HTTP on a real database: Allow answers
// {"redirect"} (the contract's name, not redirect_uri), the callback with
// code, state and iss; the token endpoint answers exactly {access_token,
// token_type: "Bearer", scope: "account"}.
func TestApproveThenTokenAnswersTheContractsShape(t *testing.T) {
	f := newCodeFixture(t)
	mux := http.NewServeMux()
	sess := func(*http.Request) (Principal, bool) { return Principal{UserID: f.user.ID, UserName: "alice"}, true }
	NewHandler(f.store, issuer, sess, nil, slog.New(slog.DiscardHandler)).Mount(mux)

	a := answer(t, serve(mux, consoleRequest("/cb/api/oauth/approve", "application/json", goodQuery())))
	redirect, _ := a["redirect"].(string)
	cb, err := url.Parse(redirect)
	if err != nil || len(a) != 1 || redirect == "" || cb.Host != "127.0.0.1:41234" || cb.Path != "/callback" {
		t.Fatalf("approve answered %v", a)
	}
	q := cb.Query()
	if q.Get("state") != "st4te" || q.Get("iss") != issuer || q.Get("code") == "" {
		t.Fatalf("callback %s lacks code, state or iss", cb)
	}
	form := goodTokenForm()
	form.Set("code", q.Get("code"))
	resp := serve(mux, tokenRequest(form))
	var tok map[string]any
	json.NewDecoder(resp.Body).Decode(&tok)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token: %d %v", resp.StatusCode, resp.Header)
	}
	if len(tok) != 3 || tok["token_type"] != "Bearer" || tok["scope"] != "account" || tok["access_token"] == "" {
		t.Fatalf("token answer %v: want access_token, token_type and scope only", tok)
	}
	// The same code again: invalid_grant.
	resp = serve(mux, tokenRequest(form))
	if a := answer(t, resp); resp.StatusCode != 400 || a["error"] != client.ErrInvalidGrant {
		t.Fatalf("a code used twice: %d %v", resp.StatusCode, a)
	}
}
