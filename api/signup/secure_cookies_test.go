package signup_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
)

// Issue 41, Deliver 7: every cookie is Secure when the one issuer is
// https, signup's too: cb_login (the GitHub sign-in's nonce, set at
// begin) and cb_queue (the queued person's). The console's session
// cookie is api/cmd/cocoonbox's TestLoginAtAnHTTPSIssuerWithOneOriginConfigured.
func TestSignupsCookiesAreSecureAtAnHTTPSIssuer(t *testing.T) {
	a := apitest.New(t, apitest.WithTLS(), apitest.WithGitHub(githubtest.New(t)), apitest.WithoutSession())
	if !strings.HasPrefix(a.URL, "https://") {
		t.Fatalf("the issuer %s is not https", a.URL)
	}
	resp, body := a.Browser().Send("POST", "/cb/api/auth/github/begin", "application/json", `{"return_to":"/cb/"}`)
	rec := httptest.NewRecorder()
	a.Signup.SetQueueCookie(rec, signup.QueueSecretPrefix+strings.Repeat("0", 64))
	cookies := map[string]*http.Cookie{}
	for _, c := range append(resp.Cookies(), rec.Result().Cookies()...) {
		cookies[c.Name] = c
	}
	for _, name := range []string{signup.LoginCookie, signup.QueueCookie} {
		if c := cookies[name]; c == nil || !c.Secure {
			t.Errorf("%s at %s: %+v; want a Secure cookie (begin answered %d %s)", name, a.URL, c, resp.StatusCode, body)
		}
	}
}
