package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// registrar serves the registration endpoint on a fresh database.
func registrar(t *testing.T) (*Clients, string) {
	t.Helper()
	db := dbtest.New(t, users.Schema, boxes.Schema, Schema)
	clients := NewClients(db.Pool, newFetcher(t, FetcherConfig{}))
	mux := http.NewServeMux()
	NewRegistration(clients, slog.Default()).Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return clients, srv.URL + RegistrationPath
}

// The SDK's own registration (what its auth handler does when the
// metadata names a registration_endpoint) against ours: 201, a client_id,
// no secret, and the client found by Lookup with its redirect URIs.
func TestDynamicRegistrationOfAPublicClient(t *testing.T) {
	clients, endpoint := registrar(t)
	resp, err := oauthex.RegisterClient(context.Background(), endpoint, &oauthex.ClientRegistrationMetadata{
		ClientName: "codex", RedirectURIs: []string{"http://127.0.0.1:1455/auth/callback", "com.example.app:/cb"},
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
	}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(resp.ClientID) || resp.ClientSecret != "" {
		t.Fatalf("registered %+v", resp)
	}
	c, err := clients.Lookup(context.Background(), resp.ClientID)
	if err != nil || c.Name != "codex" || len(c.RedirectURIs) != 2 || c.VerifiedHost != "" {
		t.Errorf("lookup: %+v, %v", c, err)
	}
	if _, err := clients.Lookup(context.Background(), strings.Repeat("0", 32)); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("an unknown client: %v", err)
	}
}

// Each a bad input of the issue and RFC 7591 §3.2.2's error for it.
func TestRegistrationBadInputIsRefused(t *testing.T) {
	_, endpoint := registrar(t)
	cases := []struct{ body, code, want string }{
		{`{"client_name": "x", "redirect_uris": ["javascript:alert(1)"]}`, "invalid_redirect_uri", `redirect URI "javascript:alert(1)": the scheme is neither`},
		{`{"client_name": "x", "redirect_uris": ["data:text/html,hi"]}`, "invalid_redirect_uri", "the scheme is neither"},
		{`{"client_name": "x"}`, "invalid_redirect_uri", "redirect_uris: 0 given"},
		{`{"redirect_uris": []}`, "invalid_redirect_uri", "redirect_uris: 0 given"},
		{`{"redirect_uris": ["http://evil.example/cb"]}`, "invalid_redirect_uri", "http only on a loopback host"},
		{`{"redirect_uris": ["https://x.example/cb#frag"]}`, "invalid_redirect_uri", "fragment"},
		{`{"redirect_uris": ["/relative"]}`, "invalid_redirect_uri", "not an absolute URI"},
		{`{"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_basic"}`, "invalid_client_metadata", `token_endpoint_auth_method "client_secret_basic": only none`},
		{`{"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_post"}`, "invalid_client_metadata", "only none"},
		{`{"redirect_uris": ["http://127.0.0.1/cb"], "grant_types": ["client_credentials"]}`, "invalid_client_metadata", "grant_types"},
		{`{"redirect_uris": ["http://127.0.0.1/cb"], "response_types": ["token"]}`, "invalid_client_metadata", "response_types"},
		{`{"redirect_uris": ["http://127.0.0.1/cb"], "client_id": "mine"}`, "invalid_client_metadata", "client_id: the server assigns it"},
		{`[1]`, "invalid_client_metadata", "not a JSON object"},
		{`{"redirect_uris": ["http://127.0.0.1/cb"]} {}`, "invalid_client_metadata", "more than one JSON value"},
		// breaker: a NUL in client_name was a 500 (PostgreSQL's text holds
		// none), a newline and U+202E reached the consent page.
		{`{"client_name": "a\u0000b", "redirect_uris": ["http://127.0.0.1/cb"]}`, "invalid_client_metadata", "client_name: U+0000 at byte 1"},
		{`{"client_name": "a\nb", "redirect_uris": ["http://127.0.0.1/cb"]}`, "invalid_client_metadata", "client_name: U+000A"},
		{`{"client_name": "Claude\u202eedoC", "redirect_uris": ["http://127.0.0.1/cb"]}`, "invalid_client_metadata", "client_name: U+202E"},
	}
	for _, c := range cases {
		resp, err := http.Post(endpoint, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var raw bytes.Buffer
		raw.ReadFrom(resp.Body)
		resp.Body.Close()
		var got map[string]string
		json.Unmarshal(raw.Bytes(), &got)
		if resp.StatusCode != 400 || got["error"] != c.code || !strings.Contains(got["error_description"], c.want) {
			t.Errorf("%s: %d %s; want 400 %s with %q", c.body, resp.StatusCode, raw.Bytes(), c.code, c.want)
		}
	}
	resp, err := http.Post(endpoint, "text/plain", strings.NewReader(`{"redirect_uris": ["http://127.0.0.1/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a text/plain registration: %d, want 400", resp.StatusCode)
	}
}
