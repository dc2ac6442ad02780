package tokens

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuardAnswersAPlainRequest401WithReasonAndChallenge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user(t, "alice")
	dev := f.device(t, alice, "dev_0123456789abcdef")
	// A request that is not a connect call (a content type connect does not
	// speak; a bare GET would be a Connect unary GET) gets
	// the plain 401 of RFC 6750 from Guard, as the server mounts it.
	me := f.index(t).Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := FromContext(r.Context())
		w.Write([]byte(p.UserName))
	}))
	get := func(auth string) (int, string, string) {
		req := httptest.NewRequest("POST", "/me", strings.NewReader("hello"))
		req.Header.Set("Content-Type", "text/plain") // no protocol connect speaks
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		me.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(b), rec.Header().Get("WWW-Authenticate")
	}
	if code, body, _ := get("Bearer " + string(dev)); code != 200 || body != "alice" {
		t.Fatalf("live token: %d %q", code, body)
	}
	if code, body, _ := get("bearer " + string(dev)); code != 200 || body != "alice" {
		t.Fatalf("the scheme is case-insensitive (RFC 7235): %d %q", code, body)
	}
	for auth, want := range map[string]string{
		"":                                       "no bearer token",
		"Basic YTpi":                             "malformed token",
		"Bearer cbit_" + strings.Repeat("a", 64): "invite-scoped",
		"Bearer cba_" + strings.Repeat("a", 64):  "agent's access token",
		"Bearer cb_" + strings.Repeat("0", 64):   "unknown or revoked",
	} {
		code, body, challenge := get(auth)
		if code != 401 || !strings.Contains(body, want) || challenge != `Bearer error="invalid_token"` {
			t.Errorf("%q: %d %q %q; want 401 naming %q", auth, code, body, challenge, want)
		}
	}
}

func TestFromContextWithoutCheck(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("a principal in a bare context")
	}
}
