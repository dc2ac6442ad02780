package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The discovery an MCP client does, with the official SDK's own checks,
// against the built api: the control MCP's 401 names its resource
// metadata, which names the issuer, whose metadata the SDK accepts.
//
// Contract: OAuth for agents, Discovery.
func TestSDKDiscoversTheAuthorizationServerFromTheControlMCPs401(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	iss := "http://" + addr
	conf := filepath.Join(t.TempDir(), "api.yaml")
	os.WriteFile(conf, []byte("oauth:\n  public_url: "+iss+"/\n"), 0o644)
	s := startServeAt(t, stateDir(t), addr, "--config", conf)
	mcpURL := "http://" + s.addr + "/cocoonbox.mcp/control"

	resp, err := http.Post(mcpURL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("control MCP without a token: %d, want 401", resp.StatusCode)
	}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v %+v", resp.Header.Values("WWW-Authenticate"), err, cs)
	}
	prmURL := cs[0].Params["resource_metadata"]
	if want := iss + "/.well-known/oauth-protected-resource/cocoonbox.mcp/control"; prmURL != want {
		t.Fatalf("resource_metadata %q, want %q", prmURL, want)
	}
	ctx := context.Background()
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, prmURL, mcpURL, http.DefaultClient)
	if err != nil || prm == nil || len(prm.AuthorizationServers) != 1 {
		t.Fatalf("protected resource metadata: %+v, %v", prm, err)
	}
	asURL := prm.AuthorizationServers[0] + "/.well-known/oauth-authorization-server"
	asm, err := oauthex.GetAuthServerMeta(ctx, asURL, prm.AuthorizationServers[0], http.DefaultClient)
	if err != nil || asm == nil {
		t.Fatalf("authorization server metadata at %s: %+v, %v", asURL, asm, err)
	}
	if asm.RegistrationEndpoint != iss+"/cocoonbox.oauth/register" || !asm.ClientIDMetadataDocumentSupported {
		t.Errorf("metadata %+v", asm)
	}
	// The registration it names takes a public client (RFC 7591).
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		ClientName: "claude", RedirectURIs: []string{"http://localhost:33418/callback"}, TokenEndpointAuthMethod: "none"}, http.DefaultClient)
	if err != nil || reg.ClientID == "" || reg.ClientSecret != "" {
		t.Errorf("registration: %+v, %v", reg, err)
	}
	for _, p := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server/"} {
		resp, err := http.Get(iss + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}

// Off by default: no discovery, and the 401 names none.
func TestOAuthIsOffWithoutPublicURL(t *testing.T) {
	t.Parallel()
	s := startServe(t, stateDir(t))
	resp, err := http.Post("http://"+s.addr+"/cocoonbox.mcp/control", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("control MCP: %d, WWW-Authenticate %q; want 401 and none", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/cocoonbox.mcp", "/cocoonbox.oauth/register"} {
		resp, err := http.Get("http://" + s.addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s with OAuth off: %d, want 404", p, resp.StatusCode)
		}
	}
}
