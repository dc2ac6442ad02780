package oauth_test

import (
	"fmt"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// Issue 41: a client registering with grant_types ["authorization_code"]
// alone was answered and stored with refresh_token added. RFC 7591 §2:
// grant_types are the types the client will restrict itself to, and
// §3.2.1's answer is the metadata as registered. Now it is stored as
// asked, and its sign-in answers no refresh token (RFC 6749 §5.1: it is
// optional); a client naming none gets DefaultGrantTypes, and one naming
// both gets both.
func TestRegistrationKeepsTheGrantTypesAsAsked(t *testing.T) {
	a := apitest.New(t)
	for _, c := range []struct {
		asked, want string
		refresh     bool
	}{
		{`, "grant_types": ["authorization_code"]`, "[authorization_code]", false},
		{``, "[authorization_code refresh_token]", true},
		{`, "grant_types": ["refresh_token", "authorization_code"]`, "[authorization_code refresh_token]", true},
	} {
		id, reg := register(t, a, `{"client_name": "grant types", "redirect_uris": ["http://127.0.0.1:1455/cb"]`+c.asked+`}`)
		if got := fmt.Sprint(reg["grant_types"]); got != c.want {
			t.Errorf("registered with%s: grant_types %s; want %s", c.asked, got, c.want)
		}
		pair := signIn(t, a, id)
		if _, has := pair["refresh_token"]; has != c.refresh || pair["access_token"] == nil {
			t.Errorf("registered with%s: the exchange answered %v; want a refresh token %v", c.asked, pair, c.refresh)
		}
	}
}
