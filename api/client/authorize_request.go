package client

import (
	"net/url"
	"strings"
)

// MaxDeviceName is the most bytes of UTF-8 a device_name may have.
const MaxDeviceName = 64

// AuthorizeRequest is an authorization request (RFC 6749 §4.1.1 with PKCE,
// RFC 7636 §4.3) of a first-party client: what the CLI sends (Query) and
// what signin.ParseAuthorizeRequest returns once it is checked.
type AuthorizeRequest struct {
	Client        FirstParty
	RedirectURI   string // http://127.0.0.1:PORT/callback
	Scope         string // always Scope
	State         string // opaque, echoed back; 1 to 512 bytes
	CodeChallenge string // S256, 43 characters
	// DeviceName names the device on the consent page and in the device
	// list: 1 to 64 bytes of UTF-8 without control characters.
	DeviceName string
	// Invite is an invite code (cbi_ + 64 hex) or empty: the consent page
	// carries it into its GitHub sign-in (contract: Sign-in with GitHub and
	// signup), so a new person signs up and comes back to the consent.
	Invite string
}

// IsInviteCode reports whether s has the shape of an invite code: cbi_ and
// 64 lower-case hex digits.
func IsInviteCode(s string) bool {
	hex, ok := strings.CutPrefix(s, "cbi_")
	return ok && len(hex) == 64 && strings.Trim(hex, "0123456789abcdef") == ""
}

// Query is the request's query as the first-party clients send it: the
// CLI builds its authorize URL from it, and the consent page its calls.
func (r *AuthorizeRequest) Query() url.Values {
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {r.Client.ID},
		"redirect_uri":          {r.RedirectURI},
		"scope":                 {r.Scope},
		"state":                 {r.State},
		"code_challenge":        {r.CodeChallenge},
		"code_challenge_method": {MethodS256},
		"device_name":           {r.DeviceName},
	}
	if r.Invite != "" {
		q.Set("invite", r.Invite)
	}
	return q
}
