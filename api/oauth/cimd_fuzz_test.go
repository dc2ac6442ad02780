package oauth

import (
	"errors"
	"slices"
	"testing"
)

// FuzzParseDocument holds what a document the parser takes always is: its
// URL's client, with 1 to 10 redirect URIs that each pass the rule, and
// every refusal an invalid_client_metadata or invalid_redirect_uri.
func FuzzParseDocument(f *testing.F) {
	const id = "https://client.example/oauth/metadata.json"
	f.Add([]byte(`{"client_id": "` + id + `", "client_name": "x", "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}`))
	f.Add([]byte(`{"client_id": "` + id + `", "redirect_uris": ["com.example.app:/cb", "https://a.example/cb"], "grant_types": ["authorization_code"]}`))
	f.Add([]byte(`{"client_id": "` + id + `", "redirect_uris": ["javascript:alert(1)"], "client_secret": ""}`))
	f.Add([]byte(`{"client_id": "` + id + `", "redirect_uris": ["http://[::1]:80/x"], "token_endpoint_auth_method": "client_secret_basic"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseDocument(id, b)
		if err != nil {
			if !errors.Is(err, ErrInvalidMetadata) && !errors.Is(err, ErrInvalidRedirectURI) {
				t.Fatalf("refused without an OAuth error: %v", err)
			}
			return
		}
		if c.ID != id || c.VerifiedHost != "client.example" || len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > 10 || len([]rune(c.Name)) > maxName {
			t.Fatalf("took %+v", c)
		}
		if slices.ContainsFunc(c.RedirectURIs, func(u string) bool { return checkRedirectURI(u) != nil }) {
			t.Fatalf("took a redirect URI the rule refuses: %q", c.RedirectURIs)
		}
	})
}
