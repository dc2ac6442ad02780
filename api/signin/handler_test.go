package signin

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/client"
)

const issuer = "http://127.0.0.1:18200"

// requestOnly is a handler without a store: the requests below must be
// answered before anything is stored or read (nothing changed), or it panics.
func requestOnly(t *testing.T, session bool) http.Handler {
	t.Helper()
	mux := http.NewServeMux()
	sess := func(*http.Request) (Principal, bool) { return Principal{UserID: "u1", UserName: "alice"}, session }
	NewHandler(nil, issuer, sess, nil, slog.New(slog.DiscardHandler)).Mount(mux)
	return mux
}

func serve(h http.Handler, req *http.Request) *http.Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Bad input: a redirect URI that is not http://127.0.0.1:<port>/callback is
// shown as an error page, never redirected to.
func TestAuthorizeBadRedirectURIIsAnErrorPageNeverARedirect(t *testing.T) {
	h := requestOnly(t, true)
	for _, uri := range []string{
		"http://127.0.0.1:41234/other",
		"http://127.0.0.1:41234/callback?x=1",
		"http://user@127.0.0.1:41234/callback",
		"http://127.0.0.1.evil.com:41234/callback",
		"http://localhost:41234/callback",
	} {
		q := goodQuery()
		q.Set("redirect_uri", uri)
		resp := serve(h, httptest.NewRequest("GET", "/cb/oauth/authorize?"+q.Encode(), nil))
		page := body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Errorf("%s: status %d, Location %q; want 400 and no redirect", uri, resp.StatusCode, resp.Header.Get("Location"))
		}
		if !strings.Contains(page, "redirect_uri") || !strings.Contains(page, "cannot go on") || strings.Contains(page, "<script") {
			t.Errorf("%s: the page does not show the error alone:\n%s", uri, page)
		}
	}
}

func TestAuthorizeUnknownClientIsAnErrorPage(t *testing.T) {
	q := goodQuery()
	q.Set("client_id", "some-agent")
	resp := serve(requestOnly(t, true), httptest.NewRequest("GET", "/cb/oauth/authorize?"+q.Encode(), nil))
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Fatalf("status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Bad input: code_challenge_method=plain or none, and a scope other than
// account, go back to the client's callback as errors (RFC 6749 §4.1.2.1).
func TestAuthorizeBadRequestGoesBackToTheCallbackWithItsError(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(url.Values)
		code   string
	}{
		{"plain", func(q url.Values) { q.Set("code_challenge_method", "plain") }, client.ErrInvalidRequest},
		{"no method", func(q url.Values) { q.Del("code_challenge_method") }, client.ErrInvalidRequest},
		{"scope", func(q url.Values) { q.Set("scope", "boxes") }, client.ErrInvalidScope},
		{"device_name of 65 bytes", func(q url.Values) { q.Set("device_name", strings.Repeat("x", 65)) }, client.ErrInvalidRequest},
		{"device_name invalid UTF-8", func(q url.Values) { q.Set("device_name", "\xc3") }, client.ErrInvalidRequest},
	} {
		q := goodQuery()
		c.change(q)
		resp := serve(requestOnly(t, true), httptest.NewRequest("GET", "/cb/oauth/authorize?"+q.Encode(), nil))
		loc, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || err != nil {
			t.Fatalf("%s: status %d Location %q", c.name, resp.StatusCode, resp.Header.Get("Location"))
		}
		got := loc.Query()
		if loc.Scheme+"://"+loc.Host+loc.Path != "http://127.0.0.1:41234/callback" ||
			got.Get("error") != c.code || got.Get("state") != "st4te" || got.Get("iss") != issuer || got.Get("code") != "" {
			t.Errorf("%s: redirected to %s", c.name, loc)
		}
	}
}

func TestAuthorizePageCannotBeFramed(t *testing.T) {
	resp := serve(requestOnly(t, false), httptest.NewRequest("GET", "/cb/oauth/authorize?"+goodQuery().Encode(), nil))
	if resp.StatusCode != 200 || resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	if page := body(t, resp); !strings.Contains(page, `id="allow"`) || !strings.Contains(page, `id="signin"`) {
		t.Fatalf("the page has no consent or sign-in form:\n%s", page)
	}
}

func consoleRequest(path, contentType string, q url.Values) *http.Request {
	b, _ := json.Marshal(map[string]string{"query": q.Encode()})
	req := httptest.NewRequest("POST", path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", contentType)
	return req
}

func answer(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	return m
}

// Contract: POST /cb/api/oauth/check answers account: true and device_name.
func TestCheckAnswersAccountAndDeviceName(t *testing.T) {
	resp := serve(requestOnly(t, true), consoleRequest("/cb/api/oauth/check", "application/json", goodQuery()))
	a := answer(t, resp)
	if resp.StatusCode != 200 || a["account"] != true || a["device_name"] != "laptop" || a["client_name"] != "cocoonbox CLI" || a["user"] != "alice" {
		t.Fatalf("status %d answer %v", resp.StatusCode, a)
	}
}

func TestConsoleCallsNeedASessionAndJSON(t *testing.T) {
	for _, path := range []string{"/cb/api/oauth/check", "/cb/api/oauth/approve", "/cb/api/oauth/deny"} {
		resp := serve(requestOnly(t, false), consoleRequest(path, "application/json", goodQuery()))
		if a := answer(t, resp); resp.StatusCode != 401 || a["error"] != "login_required" {
			t.Errorf("%s without a session: %d %v", path, resp.StatusCode, a)
		}
		// A cross-site form can only send a simple content type: refused.
		resp = serve(requestOnly(t, true), consoleRequest(path, "text/plain", goodQuery()))
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("%s as text/plain: %d", path, resp.StatusCode)
		}
	}
}

func TestCheckOfABadRequestSaysWhereToGoOnlyWhenItMay(t *testing.T) {
	q := goodQuery()
	q.Set("scope", "boxes")
	a := answer(t, serve(requestOnly(t, true), consoleRequest("/cb/api/oauth/check", "application/json", q)))
	if a["error"] != client.ErrInvalidScope || !strings.HasPrefix(fmt.Sprint(a["redirect"]), "http://127.0.0.1:41234/callback?") {
		t.Fatalf("bad scope: %v", a)
	}
	q = goodQuery()
	q.Set("redirect_uri", "http://127.0.0.1.evil.com:1/callback")
	a = answer(t, serve(requestOnly(t, true), consoleRequest("/cb/api/oauth/check", "application/json", q)))
	if _, has := a["redirect"]; has || a["error"] != client.ErrInvalidRequest {
		t.Fatalf("bad redirect_uri: %v", a)
	}
}

func TestDenyGoesBackAsAccessDenied(t *testing.T) {
	a := answer(t, serve(requestOnly(t, true), consoleRequest("/cb/api/oauth/deny", "application/json", goodQuery())))
	loc, _ := url.Parse(fmt.Sprint(a["redirect"]))
	if q := loc.Query(); len(a) != 1 || q.Get("error") != client.ErrAccessDenied || q.Get("state") != "st4te" || q.Get("iss") != issuer {
		t.Fatalf("deny: %v", a)
	}
}

func tokenRequest(f url.Values) *http.Request {
	req := httptest.NewRequest("POST", "/cocoonbox.oauth/token", strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

func goodTokenForm() url.Values {
	return url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {"cbc_x"},
		"client_id":     {"cocoonbox-cli"},
		"redirect_uri":  {"http://127.0.0.1:41234/callback"},
		"code_verifier": {rfcVerifier},
	}
}

// Malformed token requests are refused before the code is read: it stays usable.
func TestTokenMalformedRequestRefusedBeforeTheCode(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(url.Values)
		code   string
		status int
	}{
		{"a 42-character verifier", func(f url.Values) { f.Set("code_verifier", rfcVerifier[:42]) }, client.ErrInvalidRequest, 400},
		{"no verifier", func(f url.Values) { f.Del("code_verifier") }, client.ErrInvalidRequest, 400},
		{"no code", func(f url.Values) { f.Del("code") }, client.ErrInvalidRequest, 400},
		{"another grant", func(f url.Values) { f.Set("grant_type", "refresh_token") }, client.ErrUnsupportedGrantType, 400},
		{"an unknown client", func(f url.Values) { f.Set("client_id", "agent") }, client.ErrInvalidClient, 401},
		{"a parameter twice", func(f url.Values) { f.Add("code", "cbc_y") }, client.ErrInvalidRequest, 400},
	} {
		f := goodTokenForm()
		c.change(f)
		resp := serve(requestOnly(t, true), tokenRequest(f))
		if a := answer(t, resp); resp.StatusCode != c.status || a["error"] != c.code || a["error_description"] == "" {
			t.Errorf("%s: %d %v, want %d %s", c.name, resp.StatusCode, a, c.status, c.code)
		}
	}
	req := tokenRequest(goodTokenForm())
	req.Header.Set("Content-Type", "application/json")
	if resp := serve(requestOnly(t, true), req); resp.StatusCode != 400 {
		t.Errorf("a JSON token request: %d", resp.StatusCode)
	}
}

func TestRevokeNeedsATokenAndAKnownClient(t *testing.T) {
	req := httptest.NewRequest("POST", "/cocoonbox.oauth/revoke", strings.NewReader("client_id=cocoonbox-cli"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp := serve(requestOnly(t, true), req); resp.StatusCode != 400 {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	req = httptest.NewRequest("POST", "/cocoonbox.oauth/revoke", strings.NewReader("client_id=agent&token=cb_x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp := serve(requestOnly(t, true), req); resp.StatusCode != 401 {
		t.Errorf("unknown client: %d", resp.StatusCode)
	}
}
