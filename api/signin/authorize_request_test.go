package signin

import (
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/signin/firstparty"
)

// goodQuery is the request cocoonbox login sends.
func goodQuery() url.Values {
	return url.Values{
		"response_type":         {"code"},
		"client_id":             {"cocoonbox-cli"},
		"redirect_uri":          {"http://127.0.0.1:41234/callback"},
		"scope":                 {"account"},
		"code_challenge":        {rfcChallenge},
		"code_challenge_method": {"S256"},
		"state":                 {"st4te"},
		"device_name":           {"laptop"},
	}
}

func TestAuthorizeRequestOfTheContractParses(t *testing.T) {
	for _, client := range []string{"cocoonbox-cli", "cocoonbox-app"} {
		q := goodQuery()
		q.Set("invite", "cbi_"+strings.Repeat("0a", 32))
		q.Set("client_id", client)
		r, err := ParseAuthorizeRequest(q)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		if r.Client.ID != client || r.DeviceName != "laptop" || r.State != "st4te" || r.Scope != "account" {
			t.Fatalf("%s: parsed %+v", client, r)
		}
		if got := r.Query().Encode(); got != q.Encode() {
			t.Fatalf("Query() = %s, want %s", got, q.Encode())
		}
	}
}

// Each Bad-input line of the contract's authorize request: the error code,
// and whether it may go back to the redirect URI.
func TestAuthorizeRequestBadInput(t *testing.T) {
	cases := []struct {
		name     string
		change   func(url.Values)
		code     string
		redirect bool
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "agent-7") }, firstparty.ErrInvalidClient, false},
		{"no client", func(q url.Values) { q.Del("client_id") }, firstparty.ErrInvalidClient, false},
		{"redirect to another path", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:41234/other") }, firstparty.ErrInvalidRequest, false},
		{"redirect with a query", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:41234/callback?a=b") }, firstparty.ErrInvalidRequest, false},
		{"redirect with user info", func(q url.Values) { q.Set("redirect_uri", "http://u:p@127.0.0.1:41234/callback") }, firstparty.ErrInvalidRequest, false},
		{"redirect to 127.0.0.1.evil.com", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1.evil.com:41234/callback") }, firstparty.ErrInvalidRequest, false},
		{"redirect to localhost", func(q url.Values) { q.Set("redirect_uri", "http://localhost:41234/callback") }, firstparty.ErrInvalidRequest, false},
		{"two redirect URIs", func(q url.Values) { q.Add("redirect_uri", "http://127.0.0.1:1/callback") }, firstparty.ErrInvalidRequest, false},
		{"code_challenge_method=plain", func(q url.Values) { q.Set("code_challenge_method", "plain") }, firstparty.ErrInvalidRequest, true},
		{"no code_challenge_method", func(q url.Values) { q.Del("code_challenge_method") }, firstparty.ErrInvalidRequest, true},
		{"no code_challenge", func(q url.Values) { q.Del("code_challenge") }, firstparty.ErrInvalidRequest, true},
		{"a plain-sized challenge", func(q url.Values) { q.Set("code_challenge", rfcVerifier[:42]) }, firstparty.ErrInvalidRequest, true},
		{"scope other than account", func(q url.Values) { q.Set("scope", "boxes") }, firstparty.ErrInvalidScope, true},
		{"scope account and more", func(q url.Values) { q.Set("scope", "account boxes") }, firstparty.ErrInvalidScope, true},
		{"no scope", func(q url.Values) { q.Del("scope") }, firstparty.ErrInvalidScope, true},
		{"device_name of 65 bytes", func(q url.Values) { q.Set("device_name", strings.Repeat("é", 32)+"x") }, firstparty.ErrInvalidRequest, true},
		{"device_name invalid UTF-8", func(q url.Values) { q.Set("device_name", "lap\xfftop") }, firstparty.ErrInvalidRequest, true},
		{"device_name with a control character", func(q url.Values) { q.Set("device_name", "lap\x1b[2Jtop") }, firstparty.ErrInvalidRequest, true},
		{"no device_name", func(q url.Values) { q.Del("device_name") }, firstparty.ErrInvalidRequest, true},
		{"response_type token", func(q url.Values) { q.Set("response_type", "token") }, firstparty.ErrUnsupportedResponseType, true},
		{"no state", func(q url.Values) { q.Del("state") }, firstparty.ErrInvalidRequest, true},
		{"state too long", func(q url.Values) { q.Set("state", strings.Repeat("s", 513)) }, firstparty.ErrInvalidRequest, true},
		{"an invite of the wrong shape", func(q url.Values) { q.Set("invite", "cbi_1234") }, firstparty.ErrInvalidRequest, true},
		{"a parameter twice", func(q url.Values) { q.Add("scope", "account") }, firstparty.ErrInvalidRequest, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := goodQuery()
			c.change(q)
			r, err := ParseAuthorizeRequest(q)
			if err == nil {
				t.Fatalf("accepted: %+v", r)
			}
			if err.Code != c.code || err.Redirect != c.redirect {
				t.Fatalf("got %s (redirect %v), want %s (redirect %v)", err, err.Redirect, c.code, c.redirect)
			}
			if err.Description == "" {
				t.Fatal("no error_description")
			}
		})
	}
}

// device_name of exactly 64 bytes of UTF-8 is the largest accepted.
func TestDeviceNameOf64BytesAccepted(t *testing.T) {
	q := goodQuery()
	q.Set("device_name", strings.Repeat("é", 32)) // 64 bytes, 32 runes
	if _, err := ParseAuthorizeRequest(q); err != nil {
		t.Fatal(err)
	}
}
