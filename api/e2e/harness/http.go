package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/client/login"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// Console is a console session of one user, as a browser keeps it (a cookie jar).
type Console struct {
	Endpoint string
	Client   *http.Client
}

// SignIn posts the console's sign-in form (POST /cb/api/session).
func SignIn(ctx context.Context, endpoint, user, password string) (*Console, error) {
	jar, _ := cookiejar.New(nil)
	c := &Console{Endpoint: endpoint, Client: &http.Client{Jar: jar}}
	status, body, err := c.Post(ctx, "/cb/api/session", map[string]string{"user": user, "password": password})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK && status != http.StatusNoContent {
		return nil, fmt.Errorf("console sign-in as %s: %d %s", user, status, body)
	}
	return c, nil
}

// Post sends a JSON body and answers the status and body.
func (c *Console) Post(ctx context.Context, path string, v any) (int, string, error) {
	return c.Do(ctx, "POST", path, v)
}

// Do sends a request with an optional JSON body.
func (c *Console) Do(ctx context.Context, method, path string, v any) (int, string, error) {
	var body bytes.Buffer
	if v != nil {
		json.NewEncoder(&body).Encode(v)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Endpoint+path, &body)
	if err != nil {
		return 0, "", err
	}
	if v != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.String(), nil
}

// Device signs a device in without a browser: the consent page's approve
// call on this console session, then the token endpoint, as the CLI would.
// It answers the device token.
func (c *Console) Device(ctx context.Context, deviceName string) (string, error) {
	verifier := rand.Text() + rand.Text()
	r := client.AuthorizeRequest{Client: client.CLI, RedirectURI: "http://127.0.0.1:9/callback", Scope: client.Scope,
		State: rand.Text(), CodeChallenge: client.S256(verifier), DeviceName: deviceName}
	status, body, err := c.Post(ctx, "/cb/api/oauth/approve", map[string]string{"query": r.Query().Encode()})
	if err != nil {
		return "", err
	}
	var a struct {
		Redirect string `json:"redirect"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
		return "", fmt.Errorf("approve: %d %s", status, body)
	}
	cb, err := url.Parse(a.Redirect)
	if err != nil {
		return "", err
	}
	tok, err := login.Exchange(ctx, http.DefaultClient, c.Endpoint, client.CLI.ID,
		login.Result{Code: cb.Query().Get("code"), RedirectURI: r.RedirectURI, CodeVerifier: verifier})
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// Account is an Account client calling endpoint with token over gRPC (h2c),
// as grpcurl -plaintext would.
func Account(endpoint, token string) controlv1connect.AccountClient {
	return controlv1connect.NewAccountClient(H2CClient, endpoint, connect.WithGRPC(), connect.WithInterceptors(client.BearerInterceptor(token)))
}

// Boxes is a Boxes client calling endpoint with token over gRPC (h2c).
func Boxes(endpoint, token string) controlv1connect.BoxesClient {
	return controlv1connect.NewBoxesClient(H2CClient, endpoint, connect.WithGRPC(), connect.WithInterceptors(client.BearerInterceptor(token)))
}

// H2CClient speaks cleartext HTTP/2, as gRPC clients do on a plaintext port.
var H2CClient = func() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}()

// Agent signs an agent in as an MCP client does, without a browser: a
// client registered at /cocoonbox.oauth/register (name clientName), the
// consent page's approve call on this console session with the caps
// maxBoxes and maxRunning, then the token endpoint with PKCE S256. It
// answers the grant's access token (cba_). The api needs oauth.public_url
// (Options.OAuth).
//
// Contract: OAuth for agents (Clients, Authorization, Tokens).
func (c *Console) Agent(ctx context.Context, clientName string, maxBoxes, maxRunning int) (string, error) {
	const redirect = "http://127.0.0.1:9/callback"
	reg, err := postAs(ctx, c.Endpoint+"/cocoonbox.oauth/register", "application/json",
		fmt.Sprintf(`{"client_name": %q, "redirect_uris": [%q]}`, clientName, redirect))
	if err != nil {
		return "", err
	}
	verifier := rand.Text() + rand.Text()
	q := url.Values{"response_type": {"code"}, "client_id": {reg["client_id"]}, "redirect_uri": {redirect}, "state": {rand.Text()},
		"code_challenge": {client.S256(verifier)}, "code_challenge_method": {"S256"}, "scope": {"boxes"},
		"resource": {c.Endpoint + "/cocoonbox.mcp/control"}}
	status, body, err := c.Post(ctx, "/cb/api/oauth/approve", map[string]any{"query": q.Encode(), "max_boxes": maxBoxes, "max_running": maxRunning, "days": 1})
	if err != nil {
		return "", err
	}
	var a struct {
		Redirect string `json:"redirect"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
		return "", fmt.Errorf("approve the agent %s: %d %s", clientName, status, body)
	}
	cb, err := url.Parse(a.Redirect)
	if err != nil {
		return "", err
	}
	tok, err := postAs(ctx, c.Endpoint+"/cocoonbox.oauth/token", "application/x-www-form-urlencoded", url.Values{
		"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")}, "client_id": {reg["client_id"]},
		"redirect_uri": {redirect}, "code_verifier": {verifier}, "resource": {c.Endpoint + "/cocoonbox.mcp/control"}}.Encode())
	if err != nil {
		return "", err
	}
	return tok["access_token"], nil
}

// postAs posts body as contentType and answers the JSON object's string
// fields; any status but 200 and 201 is an error.
func postAs(ctx context.Context, url, contentType, body string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var raw map[string]any
	err = json.NewDecoder(resp.Body).Decode(&raw)
	if (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated) || err != nil {
		return nil, fmt.Errorf("POST %s: %d %v (%v)", url, resp.StatusCode, raw, err)
	}
	out := map[string]string{}
	for k, v := range raw {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out, nil
}
