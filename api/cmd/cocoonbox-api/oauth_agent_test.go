package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/cocoonbox/cocoonbox/api/apiserver"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/wiretest"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// agentAPI is the built api with OAuth for agents on at its own loopback
// address, alice a user, and (with docs) a Client ID Metadata Document
// server on https loopback whose certificate the api trusts (the test
// hook apiserver.TestCIMDRootsEnv).
type agentAPI struct {
	iss, mcpURL string
	docURL      string
}

const alicePassword = "a long enough password"

func startAgentAPI(t *testing.T) *agentAPI {
	t.Helper()
	dir := stateDir(t)
	if _, errs, code := api(t, alicePassword+"\n", "users", "add", "alice", "--state-dir", dir); code != 0 {
		t.Fatalf("users add: %s", errs)
	}
	a := &agentAPI{}
	// The agent's metadata document, served over https on loopback.
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/agent.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"client_id": %q, "client_name": "Test Agent", "redirect_uris": ["http://127.0.0.1/callback"],
			"grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], "token_endpoint_auth_method": "none"}`, a.docURL)
	}))
	t.Cleanup(docs.Close)
	a.docURL = docs.URL + "/agent.json"
	roots := filepath.Join(t.TempDir(), "roots.pem")
	os.WriteFile(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: docs.Certificate().Raw}), 0o600)
	t.Setenv(apiserver.TestCIMDRootsEnv, roots)

	addr := freeAddr(t)
	a.iss = "http://" + addr
	conf := filepath.Join(t.TempDir(), "api.yaml")
	os.WriteFile(conf, []byte("oauth:\n  public_url: "+a.iss+"\n"+wiretest.Start(t).SandboxYAML()), 0o644)
	startServeAt(t, dir, addr, "--config", conf)
	a.mcpURL = a.iss + "/cocoonbox.mcp/control"
	return a
}

// callbackServer is the agent's loopback redirect URI: it hands each
// authorization response to the channel.
func callbackServer(t *testing.T) (string, chan url.Values) {
	t.Helper()
	got := make(chan url.Values, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Query()
		w.Write([]byte("signed in: back to the agent"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/callback", got
}

// consentInChromium is the SDK's AuthorizationCodeFetcher of a person
// at Chromium: it opens the authorization URL, signs in to the console
// the first time, checks what the consent page shows, clicks Allow and
// answers what reached the callback. pageHas are texts the page must show.
func consentInChromium(t *testing.T, b *webdriver.Browser, callbacks chan url.Values, pageHas ...string) auth.AuthorizationCodeFetcher {
	signedIn := false
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		if err := b.Go(ctx, args.URL); err != nil {
			return nil, err
		}
		if !signedIn {
			if err := b.Type(ctx, "#user", "alice"); err != nil {
				return nil, err
			}
			b.Type(ctx, "#password", alicePassword)
			b.Click(ctx, "#signin-submit")
			signedIn = true
		}
		if err := b.WaitFor(ctx, "the consent page", func(_, text string) bool {
			for _, want := range pageHas {
				if !strings.Contains(text, want) {
					return false
				}
			}
			// "Allow the agent X", or an unverified one's title under its warning.
			return strings.Contains(text, "to manage boxes?")
		}); err != nil {
			text, _ := b.Text(ctx)
			return nil, fmt.Errorf("%w; the page shows:\n%s", err, text)
		}
		if err := b.Click(ctx, "#allow"); err != nil {
			return nil, err
		}
		select {
		case q := <-callbacks:
			if q.Get("error") != "" {
				return nil, fmt.Errorf("the callback got %v", q)
			}
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// signInAndList signs the SDK's client in with h and calls box_list.
func signInAndList(t *testing.T, ctx context.Context, a *agentAPI, h *auth.AuthorizationCodeHandler) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.mcpURL, OAuthHandler: h, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "box_list", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("box_list: %v", err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("box_list answered an error: %s", b)
	}
	var out struct {
		Boxes []any `json:"boxes"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.Boxes == nil && !strings.Contains(string(b), "boxes") {
		t.Fatalf("box_list's result %s", b)
	}
	return cs
}

// bearerStatus is the status of a request with Authorization: Bearer tok.
func bearerStatus(t *testing.T, method, u, tok, contentType, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Must show: the official Go MCP SDK's client-side OAuth signs in end to
// end against the built api, presenting a Client ID Metadata Document
// served over https, with Chromium clicking Allow on the consent page,
// then calls box_list. Its cba_ token is refused by gRPC and the console;
// its refresh token, presented again within the grace window, answers the
// same pair.
//
// Contract: OAuth for agents (Authorization, Tokens, what a grant reaches).
func TestSDKSignsInWithAMetadataDocumentAndChromiumsAllow(t *testing.T) {
	a := startAgentAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	redirect, callbacks := callbackServer(t)
	docHost := strings.TrimPrefix(a.docURL, "https://")
	docHost = docHost[:strings.Index(docHost, "/")]
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: a.docURL},
		RedirectURL:                    redirect, // the document's loopback URI on the port this run listens on
		AuthorizationCodeFetcher: consentInChromium(t, b, callbacks, "Test Agent", docHost, "loopback",
			"cannot use your saved keys or your connected accounts"),
		RequestRefreshToken: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := signInAndList(t, ctx, a, h)
	defer cs.Close()

	ts, _ := h.TokenSource(ctx)
	tok, err := ts.Token()
	if err != nil || !strings.HasPrefix(tok.AccessToken, "cba_") || !strings.HasPrefix(tok.RefreshToken, "cbr_") {
		t.Fatalf("the SDK's token: %+v, %v", tok, err)
	}
	// A cba_ token is no user token: gRPC and the console answer 401.
	if got := bearerStatus(t, "POST", a.iss+"/cocoonbox.control.v1.Boxes/List", tok.AccessToken, "application/json", "{}"); got != 401 {
		t.Errorf("gRPC (Boxes.List) with a cba_ token: %d, want 401", got)
	}
	if got := bearerStatus(t, "POST", a.iss+"/cocoonbox.control.v1.Account/ListDevices", tok.AccessToken, "application/json", "{}"); got != 401 {
		t.Errorf("gRPC (Account) with a cba_ token: %d, want 401", got)
	}
	for _, p := range []string{"/cb/api/me", "/cb/api/keys", "/cb/api/devices"} {
		if got := bearerStatus(t, "GET", a.iss+p, tok.AccessToken, "", ""); got != 401 {
			t.Errorf("the console's %s with a cba_ token: %d, want 401", p, got)
		}
	}

	// Rotation: the refresh token works once (without resource, as the
	// SDK's refresh sends it); presented again it revokes the grant.
	refresh := func(rt string) (int, map[string]any) {
		resp, err := http.PostForm(a.iss+"/cocoonbox.oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {a.docURL}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]any
		json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got
	}
	status, got := refresh(tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, got)
	}
	fresh, freshRT := got["access_token"].(string), got["refresh_token"].(string)
	if code := mcpInitialize(t, a.mcpURL, fresh); code != 200 {
		t.Fatalf("the control MCP with the refreshed access token: %d", code)
	}
	// Presented again at once (a second process of the agent, a retry),
	// it is within the grace window: the same pair, the family live. A
	// replay after the window revokes the family: api/oauth's
	// TestFourConcurrentRefreshesLeaveTheAgentSignedIn, on an injected clock.
	status, got = refresh(tok.RefreshToken)
	if status != 200 || got["access_token"] != fresh || got["refresh_token"] != freshRT {
		t.Fatalf("the refresh token again within the grace window: %d %v; want the same pair", status, got)
	}
	if code := mcpInitialize(t, a.mcpURL, fresh); code != 200 {
		t.Errorf("the control MCP with the refreshed access token after the repeat: %d, want 200", code)
	}
	if status, got := refresh(freshRT); status != 200 {
		t.Errorf("the family's newest refresh token: %d %v", status, got)
	}
}

// Must show, the other way an agent registers: the SDK's dynamic
// registration (RFC 7591), then the same consent in Chromium and a tool
// call; a revoke at /cocoonbox.oauth/revoke then ends the agent's open
// GET stream on the control MCP.
func TestSDKSignsInWithDynamicRegistrationAndARevokeEndsItsStream(t *testing.T) {
	a := startAgentAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	redirect, callbacks := callbackServer(t)
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Registered Agent", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}}},
		AuthorizationCodeFetcher: consentInChromium(t, b, callbacks, "Registered Agent", "unverified"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := signInAndList(t, ctx, a, h)
	defer cs.Close()
	ts, _ := h.TokenSource(ctx)
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}

	// An open GET stream of a session under the token, then the revoke.
	session := mcpSession(t, a.mcpURL, tok.AccessToken)
	req, _ := http.NewRequestWithContext(ctx, "GET", a.mcpURL, nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		ended <- sc.Err()
	}()
	rv, err := http.PostForm(a.iss+"/cocoonbox.oauth/revoke", url.Values{"token": {tok.RefreshToken}})
	if err != nil {
		t.Fatal(err)
	}
	rv.Body.Close()
	if rv.StatusCode != 200 {
		t.Fatalf("revoke: %d", rv.StatusCode)
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent's GET stream outlived the revoke of its grant")
	}
	if code := mcpInitialize(t, a.mcpURL, tok.AccessToken); code != 401 {
		t.Errorf("the control MCP after the revoke: %d, want 401", code)
	}
}

// mcpInitialize posts an initialize under tok: the status.
func mcpInitialize(t *testing.T, mcpURL, tok string) int {
	t.Helper()
	code, _ := initialize(t, mcpURL, tok)
	return code
}

func initialize(t *testing.T, mcpURL, tok string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequest("POST", mcpURL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// mcpSession initializes a session under tok and sends initialized: its id.
func mcpSession(t *testing.T, mcpURL, tok string) string {
	t.Helper()
	code, id := initialize(t, mcpURL, tok)
	if code != 200 || id == "" {
		t.Fatalf("initialize: %d, session %q", code, id)
	}
	req, _ := http.NewRequest("POST", mcpURL, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return id
}
