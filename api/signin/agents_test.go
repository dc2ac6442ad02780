package signin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// With OAuth for agents on, the shared endpoints hand over an agent's
// request and keep the first-party sign-in's (Contract: OAuth for
// agents; Browser sign-in and device tokens): told apart by the client,
// the refresh_token grant, HTTP Basic, and the token's prefix.
func TestTheSharedEndpointsTellAgentsFromTheFirstPartyClients(t *testing.T) {
	mux := http.NewServeMux()
	sess := func(*http.Request) (Principal, bool) { return Principal{UserID: "u1", UserName: "alice"}, true }
	agents := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is whole for the agents' handler.
		if r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/cb/api/") {
			var b map[string]any
			if json.NewDecoder(r.Body).Decode(&b) != nil || b["query"] == nil {
				http.Error(w, "the body did not arrive whole", 500)
				return
			}
		}
		w.WriteHeader(http.StatusTeapot)
	})
	NewHandler(nil, issuer, sess, func(_ context.Context, _ string) error { return nil }, slog.New(slog.DiscardHandler)).WithAgents(agents).Mount(mux)

	agentQuery := url.Values{"client_id": {strings.Repeat("a", 32)}, "redirect_uri": {"http://127.0.0.1:1/cb"}}
	docQuery := url.Values{"client_id": {"https://agent.example/client.json"}}
	twice := goodQuery()
	twice.Add("client_id", strings.Repeat("a", 32))
	form := func(v url.Values) *http.Request {
		r := httptest.NewRequest("POST", "/cocoonbox.oauth/token", strings.NewReader(v.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	revoke := func(tok string) *http.Request {
		r := httptest.NewRequest("POST", "/cocoonbox.oauth/revoke", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	call := func(path string, q url.Values) *http.Request {
		b, _ := json.Marshal(map[string]any{"query": q.Encode(), "max_boxes": 2})
		r := httptest.NewRequest("POST", path, strings.NewReader(string(b)))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	basic := form(url.Values{"grant_type": {"authorization_code"}, "code": {"x"}})
	basic.SetBasicAuth(strings.Repeat("a", 32), "")
	cases := []struct {
		what   string
		req    *http.Request
		agents bool
	}{
		{"the page of a registered agent", httptest.NewRequest("GET", "/cb/oauth/authorize?"+agentQuery.Encode(), nil), true},
		{"the page of a metadata document's agent", httptest.NewRequest("GET", "/cb/oauth/authorize?"+docQuery.Encode(), nil), true},
		{"the page of the CLI", httptest.NewRequest("GET", "/cb/oauth/authorize?"+goodQuery().Encode(), nil), false},
		{"the page with client_id twice", httptest.NewRequest("GET", "/cb/oauth/authorize?"+twice.Encode(), nil), false},
		{"an agent's check", call("/cb/api/oauth/check", agentQuery), true},
		{"an agent's approve", call("/cb/api/oauth/approve", docQuery), true},
		{"an agent's deny", call("/cb/api/oauth/deny", agentQuery), true},
		{"the CLI's check", call("/cb/api/oauth/check", goodQuery()), false},
		{"an agent's code", form(url.Values{"grant_type": {"authorization_code"}, "client_id": {"https://agent.example/c.json"}}), true},
		{"a refresh", form(url.Values{"grant_type": {"refresh_token"}, "client_id": {"cocoonbox-cli"}}), true},
		{"a Basic client", basic, true},
		{"the CLI's code", form(url.Values{"grant_type": {"authorization_code"}, "client_id": {"cocoonbox-cli"}}), false},
		{"an agent's access token's revoke", revoke("cba_" + strings.Repeat("0", 64)), true},
		{"an agent's refresh token's revoke", revoke("cbr_" + strings.Repeat("0", 64)), true},
		{"a device token's revoke", revoke("cb_" + strings.Repeat("0", 64)), false},
	}
	for _, c := range cases {
		resp := serve(mux, c.req)
		if got := resp.StatusCode == http.StatusTeapot; got != c.agents {
			t.Errorf("%s: status %d; handed to the agents: %v, want %v", c.what, resp.StatusCode, got, c.agents)
		}
	}
}
