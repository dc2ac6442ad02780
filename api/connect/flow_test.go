package connect_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
)

// authServer is another cocoonbox-api whose control MCP is the custom
// server: a real MCP authorization server (OAuth for agents: RFC 9728 and
// 8414 discovery, dynamic registration, PKCE S256, iss), behind a TLS
// front under publicName whose oauth.public_url it is. tokenCalls counts
// the requests its token endpoint got.
type authServer struct {
	api        *apitest.API
	URL        string // https://example.com:PORT, its issuer
	roots      *x509.CertPool
	cert       *x509.Certificate // the front's
	front      string            // the front's 127.0.0.1:PORT
	tokenCalls atomic.Int64
	// refreshes counts the refresh_token grants among them.
	refreshes atomic.Int64
	alice     *http.Client // signed in to its console as alice
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	s := &authServer{}
	var proxy atomic.Pointer[httputil.ReverseProxy]
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cocoonbox.oauth/token" {
			s.tokenCalls.Add(1)
			body, _ := io.ReadAll(r.Body)
			if form, _ := url.ParseQuery(string(body)); form.Get("grant_type") == "refresh_token" {
				s.refreshes.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.Load().ServeHTTP(w, r)
	}))
	front.StartTLS()
	t.Cleanup(front.Close)
	s.front = front.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(s.front)
	s.URL = "https://" + publicName + ":" + port
	s.roots = x509.NewCertPool()
	s.roots.AddCert(front.Certificate())
	s.cert = front.Certificate()
	s.api = apitest.New(t, apitest.WithConfig(func(c *config.Config) { c.OAuth.PublicURL = s.URL }))
	backend, _ := url.Parse(s.api.URL)
	p := httputil.NewSingleHostReverseProxy(backend)
	p.FlushInterval = -1
	proxy.Store(p)

	jar, _ := cookiejar.New(nil)
	s.alice = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.roots},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, s.front)
			}}}
	if code, body := s.send(t, "POST", "/cb/api/session", map[string]string{"user": "alice", "password": apitest.Password}); code != 200 {
		t.Fatalf("sign in to the authorization server's console: %d %s", code, body)
	}
	return s
}

func (s *authServer) send(t *testing.T, method, path string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.alice.Do(req)
	if err != nil {
		t.Fatalf("%s %s on the authorization server: %v", method, path, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text)
}

// approve is alice approving the authorization request at authURL in the
// authorization server's console: the redirect (the api's callback with
// code, state and iss).
func (s *authServer) approve(t *testing.T, authURL string) *url.URL {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil || !strings.HasPrefix(authURL, s.URL+"/cb/oauth/authorize?") {
		t.Fatalf("the authorization URL %q is not the server's authorize page", authURL)
	}
	code, body := s.send(t, "POST", "/cb/api/oauth/approve", map[string]any{"query": u.RawQuery})
	var got struct{ Redirect string }
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("approve: %d %s", code, body)
	}
	r, err := url.Parse(got.Redirect)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// flowFixture is an api with Connect (the user's side) and the
// authorization server it reaches under publicName.
type flowFixture struct {
	a  *apitest.API
	as *authServer
}

func newFlowFixture(t *testing.T, opts ...apitest.Option) *flowFixture {
	as := startAuthServer(t)
	a := apitest.New(t, append([]apitest.Option{apitest.WithConnect(as.upstream())}, opts...)...)
	return &flowFixture{a: a, as: as}
}

// spki is the base64 SHA-256 of the front's public key, for Chromium's
// --ignore-certificate-errors-spki-list.
func (s *authServer) spki() string {
	sum := sha256.Sum256(s.cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// upstream is the outbound settings that reach s under publicName.
func (s *authServer) upstream() connect.UpstreamConfig {
	return connect.UpstreamConfig{Resolve: map[string]netip.Addr{publicName: netip.MustParseAddr("127.0.0.1")}, Roots: s.roots}
}

// connect connects the control MCP as name through the whole flow in
// alice's console session.
func (f *flowFixture) connect(t *testing.T, name string) {
	t.Helper()
	authURL, nonce := f.begin(t, f.a.Session, name)
	if got := f.callback(t, f.as.approve(t, authURL), nonce); got.Get("connected") != name {
		t.Fatalf("the callback went to %v, want ?connected=%s", got, name)
	}
}

// begin begins the flow for name in browser b: the authorization URL and
// the nonce cookie, checked against the contract's attributes.
func (f *flowFixture) begin(t *testing.T, b *apitest.Browser, name string) (string, *http.Cookie) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name, "url": f.as.URL + client.MCPPath})
	resp, text := b.Send("POST", "/cb/api/connect/custom/begin", "application/json", string(body))
	var got struct{ URL string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &got) != nil || got.URL == "" {
		t.Fatalf("begin %s: %d %s", name, resp.StatusCode, text)
	}
	var nonce *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == connect.NonceCookie {
			nonce = c
		}
	}
	if nonce == nil || nonce.Path != "/cocoonbox.connect/" || !nonce.HttpOnly || !nonce.Secure || nonce.SameSite != http.SameSiteLaxMode ||
		nonce.MaxAge != 600 || len(nonce.Value) < 43 {
		t.Fatalf("begin set the nonce cookie %v, want cb_connect Path=/cocoonbox.connect/ HttpOnly Secure SameSite=Lax Max-Age=600", nonce)
	}
	return got.URL, nonce
}

// callback sends the browser to the redirect with the nonce cookie (nil
// for none) and answers where the api sent it back, checking that the
// nonce cookie is cleared.
func (f *flowFixture) callback(t *testing.T, redirect *url.URL, nonce *http.Cookie) url.Values {
	t.Helper()
	if got := redirect.Scheme + "://" + redirect.Host + redirect.Path; got != f.a.URL+connect.CallbackPath {
		t.Fatalf("the redirect goes to %s, not the api's callback %s", got, f.a.URL+connect.CallbackPath)
	}
	req, _ := http.NewRequest("GET", redirect.String(), nil)
	if nonce != nil {
		req.AddCookie(&http.Cookie{Name: nonce.Name, Value: nonce.Value})
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == connect.NonceCookie && c.MaxAge < 0 && c.Path == "/cocoonbox.connect/")
	}
	to := ""
	if m := refresh.FindStringSubmatch(string(body)); m != nil {
		to = html.UnescapeString(m[1])
	}
	loc, err := url.Parse(to)
	if resp.StatusCode != http.StatusOK || err != nil || loc.Path != "/cb/connect" || !cleared {
		t.Fatalf("the callback answered %d going on to %q (nonce cleared: %v), want 200 going on to /cb/connect, the nonce cleared:\n%s", resp.StatusCode, to, cleared, body)
	}
	return loc.Query()
}

// refresh finds where the callback's page goes on to.
var refresh = regexp.MustCompile(`<meta http-equiv="refresh" content="0; url=([^"]+)">`)

// refused expects the callback's answer to be ?error= containing want.
func refused(t *testing.T, got url.Values, want string) {
	t.Helper()
	if got.Has("connected") || !strings.Contains(got.Get("error"), want) {
		t.Fatalf("the callback went to %v, want ?error= with %q", got, want)
	}
}

// Issue 44, Deliver 1 (must show): a custom MCP server that needs OAuth
// connected through MCP discovery by the console flow, the server being
// another cocoonbox-api's control MCP: its 401 names its resource
// metadata (RFC 9728), which names its authorization server (RFC 8414);
// the api registers a client (RFC 7591), sends the browser to its
// authorize page with PKCE S256 and resource (RFC 8707), and at the
// callback checks the nonce cookie, the state and iss (RFC 9207), then
// exchanges the code and stores the grant sealed. The official Go SDK's
// client on the mode B door then calls the server's tools with the
// token.
func TestConsoleFlowConnectsAServerThroughMCPDiscovery(t *testing.T) {
	f := newFlowFixture(t)
	ctx := context.Background()
	authURL, nonce := f.begin(t, f.a.Session, "agents")
	q, _ := url.ParseQuery(strings.SplitN(authURL, "?", 2)[1])
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || q.Get("resource") != f.as.URL+client.MCPPath ||
		q.Get("redirect_uri") != f.a.URL+connect.CallbackPath || q.Get("client_id") == "" || len(q.Get("state")) < 43 || q.Get("scope") != "boxes" {
		t.Fatalf("the authorization request: %v", q)
	}
	redirect := f.as.approve(t, authURL)
	if redirect.Query().Get("iss") != f.as.URL {
		t.Fatalf("the authorization server's redirect %s names no iss %s", redirect, f.as.URL)
	}
	got := f.callback(t, redirect, nonce)
	if got.Get("connected") != "agents" {
		t.Fatalf("the callback went to %v, want ?connected=agents", got)
	}

	resp, listed := f.a.Session.Send("GET", "/cb/api/connect", "", "")
	var list struct{ Connectors []connect.Connector }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(listed), &list) != nil || len(list.Connectors) != 1 {
		t.Fatalf("GET /cb/api/connect: %d %s", resp.StatusCode, listed)
	}
	if c := list.Connectors[0]; c.ID != "agents" || c.Auth != "oauth" || len(c.Tools) == 0 {
		t.Fatalf("the connector: %+v", c)
	}
	var sealed []byte
	if err := f.a.DB.Pool.QueryRow(ctx, "SELECT secret_sealed FROM connect_grants WHERE connector = 'agents'").Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "cba_") || strings.Contains(string(sealed), "access_token") {
		t.Fatal("the grant's token is in connect_grants in the clear")
	}

	cs := door(t, f.a, string(f.a.PersonalToken(f.a.User.ID)))
	if names := toolNames(t, cs); !slices.Contains(names, "agents__box_list") || !slices.Contains(names, "agents__usage") {
		t.Fatalf("tools on the door: %v, want agents__box_list and agents__usage", names)
	}
	// The server has no box supervisor: its own answer to box_list says
	// so, which it gives only past its token check.
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "agents__box_list", Arguments: map[string]any{}})
	if err != nil || !strings.Contains(text(res), "box_list: this api has no box supervisor") {
		t.Fatalf("agents__box_list through the door with the grant's token: %v %v %q", err, res, text(res))
	}

	// The same answer again: the state was used.
	refused(t, f.callback(t, redirect, nonce), "used already")
}

// Issue 44, must show: every refusal of the console flow. Each is seen
// by the page as ?error=, and the ones after the nonce spend the flow
// before any token request.
func TestConsoleFlowRefusals(t *testing.T) {
	f := newFlowFixture(t)
	ctx := context.Background()

	t.Run("forged callback", func(t *testing.T) {
		_, nonce := f.begin(t, f.a.Session, "forged")
		before := f.as.tokenCalls.Load()
		forged, _ := url.Parse(f.a.URL + connect.CallbackPath + "?code=made-up&state=made-up&iss=" + url.QueryEscape(f.as.URL))
		refused(t, f.callback(t, forged, nonce), "unknown")
		if f.as.tokenCalls.Load() != before {
			t.Fatal("a forged callback reached the token endpoint")
		}
	})

	t.Run("wrong nonce and another user's browser", func(t *testing.T) {
		authURL, nonce := f.begin(t, f.a.Session, "nonce")
		redirect := f.as.approve(t, authURL)
		refused(t, f.callback(t, redirect, nil), "another browser")
		refused(t, f.callback(t, redirect, &http.Cookie{Name: connect.NonceCookie, Value: strings.Repeat("A", 43)}), "another browser")
		// bob, signed in on the same api, has a flow and a nonce of his
		// own: his browser cannot finish alice's.
		f.a.AddUser("bob", false)
		bob := f.a.SignIn("bob")
		_, bobNonce := f.begin(t, bob, "nonce")
		refused(t, f.callback(t, redirect, bobNonce), "another browser")
		// The refusals left the flow for alice's browser.
		if got := f.callback(t, redirect, nonce); got.Get("connected") != "nonce" {
			t.Fatalf("alice's own browser after the refusals: %v, want ?connected=nonce", got)
		}
		resp, text := bob.Send("GET", "/cb/api/connect", "", "")
		if resp.StatusCode != 200 || strings.Contains(text, `"id":"nonce"`) {
			t.Fatalf("bob's connectors: %d %s", resp.StatusCode, text)
		}
	})

	t.Run("wrong iss", func(t *testing.T) {
		authURL, nonce := f.begin(t, f.a.Session, "wrong-iss")
		redirect := f.as.approve(t, authURL)
		q := redirect.Query()
		q.Set("iss", "https://other.example.com")
		redirect.RawQuery = q.Encode()
		before := f.as.tokenCalls.Load()
		refused(t, f.callback(t, redirect, nonce), "refused")
		q.Set("iss", f.as.URL)
		redirect.RawQuery = q.Encode()
		refused(t, f.callback(t, redirect, nonce), "used already")
		if f.as.tokenCalls.Load() != before {
			t.Fatal("a code answered under another iss reached the token endpoint")
		}
	})

	t.Run("missing iss when advertised", func(t *testing.T) {
		authURL, nonce := f.begin(t, f.a.Session, "no-iss")
		redirect := f.as.approve(t, authURL)
		q := redirect.Query()
		q.Del("iss")
		redirect.RawQuery = q.Encode()
		before := f.as.tokenCalls.Load()
		refused(t, f.callback(t, redirect, nonce), "does not name its authorization server")
		if f.as.tokenCalls.Load() != before {
			t.Fatal("a code answered without iss reached the token endpoint")
		}
	})

	t.Run("expired state", func(t *testing.T) {
		authURL, nonce := f.begin(t, f.a.Session, "expired")
		redirect := f.as.approve(t, authURL)
		if _, err := f.a.DB.Pool.Exec(ctx, "UPDATE connect_flows SET expires_at = now() - interval '1 second' WHERE connector = 'expired'"); err != nil {
			t.Fatal(err)
		}
		refused(t, f.callback(t, redirect, nonce), "expired")
	})

	t.Run("the session that began it ended", func(t *testing.T) {
		b := f.a.SignIn("alice")
		authURL, nonce := f.begin(t, b, "signed-out")
		redirect := f.as.approve(t, authURL)
		if resp, text := b.Send("DELETE", "/cb/api/session", "", ""); resp.StatusCode/100 != 2 {
			t.Fatalf("sign out: %d %s", resp.StatusCode, text)
		}
		refused(t, f.callback(t, redirect, nonce), "session that began this sign-in has ended")
	})

	resp, text := f.a.Session.Send("GET", "/cb/api/connect", "", "")
	var list struct{ Connectors []connect.Connector }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &list) != nil {
		t.Fatalf("GET /cb/api/connect: %d %s", resp.StatusCode, text)
	}
	var ids []string
	for _, c := range list.Connectors {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"nonce"}) {
		t.Fatalf("alice's connectors after the refusals: %v, want only nonce", ids)
	}
}
