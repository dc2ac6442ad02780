package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// discovery serves NewMetadata of the test server's own origin, as the
// api does with oauth.public_url.
func discovery(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// NewMetadata needs the origin, known once the server listens.
		m := NewMetadata(srv.URL)
		inner := http.NewServeMux()
		m.Mount(inner)
		inner.ServeHTTP(w, r)
	}))
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if resp.StatusCode == 200 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", url, ct)
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
	return resp.StatusCode, doc
}

// The contract's list, field by field, and the SDK's own checks
// (GetAuthServerMeta compares the issuer and wants PKCE).
func TestAuthorizationServerMetadataIsTheContractsList(t *testing.T) {
	iss := discovery(t)
	code, doc := get(t, iss+ASMetadataPath)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	want := map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + "/cb/oauth/authorize",
		"token_endpoint":                                 iss + "/cocoonbox.oauth/token",
		"registration_endpoint":                          iss + "/cocoonbox.oauth/register",
		"revocation_endpoint":                            iss + "/cocoonbox.oauth/revoke",
		"scopes_supported":                               []any{"boxes"},
		"response_types_supported":                       []any{"code"},
		"grant_types_supported":                          []any{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []any{"S256"},
		"token_endpoint_auth_methods_supported":          []any{"none"},
		"revocation_endpoint_auth_methods_supported":     []any{"none"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
	}
	if !reflect.DeepEqual(doc, want) {
		t.Errorf("metadata\n%v\nwant\n%v", doc, want)
	}
	asm, err := oauthex.GetAuthServerMeta(context.Background(), iss+ASMetadataPath, iss, http.DefaultClient)
	if err != nil || asm == nil {
		t.Fatalf("the SDK refuses it: %v, %v", asm, err)
	}
}

// RFC 9728 §3.3 as the SDK checks it: the resource equals the URL the
// well-known string went into, for the resource and any path under it.
func TestProtectedResourceMetadataAtTheResourceAndEveryPathUnderIt(t *testing.T) {
	iss := discovery(t)
	for _, path := range []string{"/cocoonbox.mcp", "/cocoonbox.mcp/control", "/cocoonbox.mcp/box/main", "/cocoonbox.mcp/connect"} {
		prm, err := oauthex.GetProtectedResourceMetadata(context.Background(),
			iss+"/.well-known/oauth-protected-resource"+path, iss+path, http.DefaultClient)
		if err != nil || prm == nil {
			t.Fatalf("%s: the SDK refuses it: %v", path, err)
		}
		if !reflect.DeepEqual(prm.AuthorizationServers, []string{iss}) || !reflect.DeepEqual(prm.ScopesSupported, []string{"boxes"}) {
			t.Errorf("%s: %+v", path, prm)
		}
	}
}

func TestUnknownWellKnownPathsAndStraySlashesAre404(t *testing.T) {
	iss := discovery(t)
	for _, p := range []string{
		"/.well-known/oauth-authorization-server/",
		"/.well-known/oauth-authorization-server/cocoonbox.mcp",
		"/.well-known/openid-configuration",
		"/.well-known/oauth-protected-resource",
		"/.well-known/oauth-protected-resource/",
		"/.well-known/oauth-protected-resource/cocoonbox.mcpx",
		"/.well-known/oauth-protected-resource/cocoonbox.mcp/",
		"/.well-known/oauth-protected-resource/cocoonbox.mcp/control/",
		"/.well-known/oauth-protected-resource/cocoonbox.mcp/a%2F..",
		"/.well-known/oauth-protected-resource/cocoonbox.mcp/.hidden",
		"/.well-known/oauth-protected-resource/cocoonbox.oauth",
	} {
		if code, _ := get(t, iss+p); code != 404 {
			t.Errorf("%s: status %d, want 404", p, code)
		}
	}
	// No document names a URL ending in "/": the SDK compares them as strings.
	for _, p := range []string{ASMetadataPath, PRMetadataPath, PRMetadataPath + "/control"} {
		_, doc := get(t, iss+p)
		b, _ := json.Marshal(doc)
		if strings.Contains(string(b), `/"`) {
			t.Errorf("%s: a URL ends in a slash: %s", p, b)
		}
	}
}
