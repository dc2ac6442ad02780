package signin

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDeviceName is the most bytes of UTF-8 a device_name may have.
const MaxDeviceName = 64

// maxState bounds the client's opaque state, so a request cannot make us
// store or echo an arbitrary amount of data.
const maxState = 512

// AuthorizeRequest is a parsed authorization request (RFC 6749 §4.1.1 with
// PKCE, RFC 7636 §4.3) of a first-party client.
type AuthorizeRequest struct {
	Client        Client
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

// ParseAuthorizeRequest checks the query of /cb/oauth/authorize (and the
// {query} of the check, approve and deny calls). The client and the redirect
// URI are checked first: an error about them has Redirect false and must be
// shown to the user, never sent to the redirect URI. Every other error has
// Redirect true. Each parameter may appear once (RFC 6749 §3.1).
//
// Contract: Browser sign-in and device tokens.
func ParseAuthorizeRequest(q url.Values) (*AuthorizeRequest, *Error) {
	one := func(name string) (string, bool) {
		v := q[name]
		if len(v) > 1 {
			return "", false
		}
		if len(v) == 0 {
			return "", true
		}
		return v[0], true
	}
	clientID, ok := one("client_id")
	if !ok {
		return nil, &Error{Code: ErrInvalidRequest, Description: "client_id is given more than once"}
	}
	client, known := LookupClient(clientID)
	if !known {
		return nil, &Error{Code: ErrInvalidClient, Description: "client_id " + quote(clientID) + " is not a cocoonbox client (cocoonbox-cli or cocoonbox-app)"}
	}
	redirectURI, ok := one("redirect_uri")
	if !ok {
		return nil, &Error{Code: ErrInvalidRequest, Description: "redirect_uri is given more than once"}
	}
	if err := CheckRedirectURI(redirectURI); err != nil {
		return nil, &Error{Code: ErrInvalidRequest, Description: err.Error()}
	}

	// From here on the client and its redirect URI are good (§4.1.2.1).
	for name, v := range q {
		if len(v) > 1 {
			return nil, redirectable(ErrInvalidRequest, "%s is given more than once", name)
		}
	}
	r := &AuthorizeRequest{Client: client, RedirectURI: redirectURI}
	switch rt := q.Get("response_type"); rt {
	case "code":
	case "":
		return nil, redirectable(ErrInvalidRequest, "response_type is missing: it must be code")
	default:
		return nil, redirectable(ErrUnsupportedResponseType, "response_type %s is not supported: it must be code", quote(rt))
	}
	r.State = q.Get("state")
	if r.State == "" || len(r.State) > maxState {
		return nil, redirectable(ErrInvalidRequest, "state must be 1 to %d bytes, got %d", maxState, len(r.State))
	}
	if scope := q.Get("scope"); scope != Scope {
		return nil, redirectable(ErrInvalidScope, "scope %s is not allowed: %s may ask only for %s", quote(scope), client.ID, Scope)
	}
	r.Scope = Scope
	switch m := q.Get("code_challenge_method"); m {
	case MethodS256:
	case "":
		return nil, redirectable(ErrInvalidRequest, "code_challenge_method is missing: it must be S256")
	default:
		return nil, redirectable(ErrInvalidRequest, "code_challenge_method %s is not supported: it must be S256", quote(m))
	}
	r.CodeChallenge = q.Get("code_challenge")
	if err := CheckChallenge(r.CodeChallenge); err != nil {
		return nil, redirectable(ErrInvalidRequest, "%s", err.Error())
	}
	r.DeviceName = q.Get("device_name")
	if err := checkDeviceName(r.DeviceName); err != nil {
		return nil, err
	}
	r.Invite = q.Get("invite")
	if r.Invite != "" && !IsInviteCode(r.Invite) {
		return nil, redirectable(ErrInvalidRequest, "invite must be cbi_ and 64 hex digits")
	}
	return r, nil
}

// IsInviteCode reports whether s has the shape of an invite code: cbi_ and
// 64 lower-case hex digits.
func IsInviteCode(s string) bool {
	hex, ok := strings.CutPrefix(s, "cbi_")
	return ok && len(hex) == 64 && strings.Trim(hex, "0123456789abcdef") == ""
}

// checkDeviceName applies the contract's bound (at most 64 bytes of UTF-8)
// and ours: not empty, no control characters (it is printed in terminals).
func checkDeviceName(name string) *Error {
	switch {
	case name == "":
		return redirectable(ErrInvalidRequest, "device_name is missing: it names the device in the device list")
	case len(name) > MaxDeviceName:
		return redirectable(ErrInvalidRequest, "device_name is %d bytes: at most %d bytes of UTF-8", len(name), MaxDeviceName)
	case !utf8.ValidString(name):
		return redirectable(ErrInvalidRequest, "device_name is not valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return redirectable(ErrInvalidRequest, "device_name holds a control character")
	}
	return nil
}

// quote shows a parameter's value in an error, cut short so a huge value
// does not make a huge page.
func quote(s string) string {
	const most = 80
	if len(s) > most {
		s = s[:most] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "\uFFFD") + "\""
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
