package signin

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// FuzzParseAuthorizeRequest feeds raw query strings to the parser. Whatever
// it accepts must keep every rule: the client fixed, the redirect URI the
// loopback callback, scope account, an S256 challenge, a bounded device name
// and state; and it must parse its own Query() back to the same request.
// An error about the client or the redirect URI must never be redirectable.
func FuzzParseAuthorizeRequest(f *testing.F) {
	f.Add(goodQuery().Encode())
	f.Add("client_id=cocoonbox-app&redirect_uri=http%3A%2F%2F127.0.0.1.evil.com%3A1%2Fcallback")
	f.Add("client_id=cocoonbox-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcallback&scope=account&code_challenge_method=plain")
	f.Add("client_id=x&client_id=cocoonbox-cli")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		r, perr := ParseAuthorizeRequest(q)
		if perr != nil {
			if perr.Redirect && CheckRedirectURI(q.Get("redirect_uri")) != nil {
				t.Fatalf("error %v is redirectable to a bad redirect_uri %q", perr, q.Get("redirect_uri"))
			}
			if perr.Redirect && len(q["redirect_uri"]) != 1 {
				t.Fatalf("error %v is redirectable with %d redirect_uris", perr, len(q["redirect_uri"]))
			}
			return
		}
		if _, ok := client.LookupFirstParty(r.Client.ID); !ok {
			t.Fatalf("accepted client %q", r.Client.ID)
		}
		if CheckRedirectURI(r.RedirectURI) != nil || !strings.HasPrefix(r.RedirectURI, "http://127.0.0.1:") {
			t.Fatalf("accepted redirect_uri %q", r.RedirectURI)
		}
		if r.Scope != client.Scope || CheckChallenge(r.CodeChallenge) != nil {
			t.Fatalf("accepted scope %q challenge %q", r.Scope, r.CodeChallenge)
		}
		if r.DeviceName == "" || len(r.DeviceName) > client.MaxDeviceName || !utf8.ValidString(r.DeviceName) {
			t.Fatalf("accepted device_name %q", r.DeviceName)
		}
		if r.State == "" || len(r.State) > maxState {
			t.Fatalf("accepted state of %d bytes", len(r.State))
		}
		again, perr := ParseAuthorizeRequest(r.Query())
		if perr != nil || *again != *r {
			t.Fatalf("Query() does not parse back: %v %+v vs %+v", perr, again, r)
		}
	})
}
