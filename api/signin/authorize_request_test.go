package signin

import (
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/client"
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
		{"unknown client", func(q url.Values) { q.Set("client_id", "agent-7") }, client.ErrInvalidClient, false},
		{"no client", func(q url.Values) { q.Del("client_id") }, client.ErrInvalidClient, false},
		{"redirect to another path", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:41234/other") }, client.ErrInvalidRequest, false},
		{"redirect with a query", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:41234/callback?a=b") }, client.ErrInvalidRequest, false},
		{"redirect with user info", func(q url.Values) { q.Set("redirect_uri", "http://u:p@127.0.0.1:41234/callback") }, client.ErrInvalidRequest, false},
		{"redirect to 127.0.0.1.evil.com", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1.evil.com:41234/callback") }, client.ErrInvalidRequest, false},
		{"redirect to localhost", func(q url.Values) { q.Set("redirect_uri", "http://localhost:41234/callback") }, client.ErrInvalidRequest, false},
		{"two redirect URIs", func(q url.Values) { q.Add("redirect_uri", "http://127.0.0.1:1/callback") }, client.ErrInvalidRequest, false},
		{"code_challenge_method=plain", func(q url.Values) { q.Set("code_challenge_method", "plain") }, client.ErrInvalidRequest, true},
		{"no code_challenge_method", func(q url.Values) { q.Del("code_challenge_method") }, client.ErrInvalidRequest, true},
		{"no code_challenge", func(q url.Values) { q.Del("code_challenge") }, client.ErrInvalidRequest, true},
		{"a plain-sized challenge", func(q url.Values) { q.Set("code_challenge", rfcVerifier[:42]) }, client.ErrInvalidRequest, true},
		{"scope other than account", func(q url.Values) { q.Set("scope", "boxes") }, client.ErrInvalidScope, true},
		{"scope account and more", func(q url.Values) { q.Set("scope", "account boxes") }, client.ErrInvalidScope, true},
		{"no scope", func(q url.Values) { q.Del("scope") }, client.ErrInvalidScope, true},
		{"device_name of 65 bytes", func(q url.Values) { q.Set("device_name", strings.Repeat("é", 32)+"x") }, client.ErrInvalidRequest, true},
		{"device_name invalid UTF-8", func(q url.Values) { q.Set("device_name", "lap\xfftop") }, client.ErrInvalidRequest, true},
		{"device_name with a control character", func(q url.Values) { q.Set("device_name", "lap\x1b[2Jtop") }, client.ErrInvalidRequest, true},
		{"no device_name", func(q url.Values) { q.Del("device_name") }, client.ErrInvalidRequest, true},
		{"response_type token", func(q url.Values) { q.Set("response_type", "token") }, client.ErrUnsupportedResponseType, true},
		{"no state", func(q url.Values) { q.Del("state") }, client.ErrInvalidRequest, true},
		{"state too long", func(q url.Values) { q.Set("state", strings.Repeat("s", 513)) }, client.ErrInvalidRequest, true},
		{"an invite of the wrong shape", func(q url.Values) { q.Set("invite", "cbi_1234") }, client.ErrInvalidRequest, true},
		{"a parameter twice", func(q url.Values) { q.Add("scope", "account") }, client.ErrInvalidRequest, true},
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
