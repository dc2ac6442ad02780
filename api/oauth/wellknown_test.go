package oauth_test

import (
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/oauth"
)

// Issue 41: under the protected-resource metadata path an empty or dot
// segment answered a redirect (net/http's ServeMux cleaning the path) to
// the cleaned path's document where docs/oauth.md promises 404. The api
// as built (apitest.New), a client that does not follow redirects.
func TestUncleanWellKnownPathsAre404NotARedirect(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession())
	b := a.Browser()
	for _, p := range []string{
		oauth.PRMetadataPath + "//control",
		oauth.PRMetadataPath + "/./control",
		oauth.PRMetadataPath + "/control/.",
		oauth.PRMetadataPath + "/control/..",
		oauth.PRMetadataPath + "/control//",
		"/.well-known//oauth-protected-resource/cocoonbox.mcp",
		"/.well-known/./oauth-authorization-server",
		oauth.ASMetadataPath + "/..",
	} {
		if resp, text := b.Send("GET", p, "", ""); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d (Location %q) %.80s; want 404", p, resp.StatusCode, resp.Header.Get("Location"), text)
		}
	}
	// The documents themselves still answer.
	for _, p := range []string{oauth.ASMetadataPath, oauth.PRMetadataPath, oauth.PRMetadataPath + "/control"} {
		if resp, text := b.Send("GET", p, "", ""); resp.StatusCode != 200 {
			t.Errorf("GET %s: %d %.80s", p, resp.StatusCode, text)
		}
	}
}
