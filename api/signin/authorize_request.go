package signin

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// maxState bounds the client's opaque state, so a request cannot make us
// store or echo an arbitrary amount of data.
const maxState = 512

// ParseAuthorizeRequest checks the query of /cb/oauth/authorize (and the
// {query} of the check, approve and deny calls). The client and the redirect
// URI are checked first: an error about them has Redirect false and must be
// shown to the user, never sent to the redirect URI. Every other error has
// Redirect true. Each parameter may appear once (RFC 6749 §3.1).
//
// Contract: Browser sign-in and device tokens.
func ParseAuthorizeRequest(q url.Values) (*client.AuthorizeRequest, *Error) {
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
		return nil, &Error{Code: client.ErrInvalidRequest, Description: "client_id is given more than once"}
	}
	fp, known := client.LookupFirstParty(clientID)
	if !known {
		return nil, &Error{Code: client.ErrInvalidClient, Description: "client_id " + quote(clientID) + " is not a cocoonbox client (cocoonbox-cli or cocoonbox-app)"}
	}
	redirectURI, ok := one("redirect_uri")
	if !ok {
		return nil, &Error{Code: client.ErrInvalidRequest, Description: "redirect_uri is given more than once"}
	}
	if err := CheckRedirectURI(redirectURI); err != nil {
		return nil, &Error{Code: client.ErrInvalidRequest, Description: err.Error()}
	}

	// From here on the client and its redirect URI are good (§4.1.2.1).
	for name, v := range q {
		if len(v) > 1 {
			return nil, redirectable(client.ErrInvalidRequest, "%s is given more than once", name)
		}
	}
	r := &client.AuthorizeRequest{Client: fp, RedirectURI: redirectURI}
	switch rt := q.Get("response_type"); rt {
	case "code":
	case "":
		return nil, redirectable(client.ErrInvalidRequest, "response_type is missing: it must be code")
	default:
		return nil, redirectable(client.ErrUnsupportedResponseType, "response_type %s is not supported: it must be code", quote(rt))
	}
	r.State = q.Get("state")
	if r.State == "" || len(r.State) > maxState {
		return nil, redirectable(client.ErrInvalidRequest, "state must be 1 to %d bytes, got %d", maxState, len(r.State))
	}
	if scope := q.Get("scope"); scope != client.Scope {
		return nil, redirectable(client.ErrInvalidScope, "scope %s is not allowed: %s may ask only for %s", quote(scope), fp.ID, client.Scope)
	}
	r.Scope = client.Scope
	switch m := q.Get("code_challenge_method"); m {
	case client.MethodS256:
	case "":
		return nil, redirectable(client.ErrInvalidRequest, "code_challenge_method is missing: it must be S256")
	default:
		return nil, redirectable(client.ErrInvalidRequest, "code_challenge_method %s is not supported: it must be S256", quote(m))
	}
	r.CodeChallenge = q.Get("code_challenge")
	if err := CheckChallenge(r.CodeChallenge); err != nil {
		return nil, redirectable(client.ErrInvalidRequest, "%s", err.Error())
	}
	r.DeviceName = q.Get("device_name")
	if err := checkDeviceName(r.DeviceName); err != nil {
		return nil, err
	}
	r.Invite = q.Get("invite")
	if r.Invite != "" && !client.IsInviteCode(r.Invite) {
		return nil, redirectable(client.ErrInvalidRequest, "invite must be cbi_ and 64 hex digits")
	}
	return r, nil
}

// checkDeviceName applies the contract's bound (at most 64 bytes of UTF-8)
// and ours: not empty, no control characters (it is printed in terminals).
func checkDeviceName(name string) *Error {
	switch {
	case name == "":
		return redirectable(client.ErrInvalidRequest, "device_name is missing: it names the device in the device list")
	case len(name) > client.MaxDeviceName:
		return redirectable(client.ErrInvalidRequest, "device_name is %d bytes: at most %d bytes of UTF-8", len(name), client.MaxDeviceName)
	case !utf8.ValidString(name):
		return redirectable(client.ErrInvalidRequest, "device_name is not valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return redirectable(client.ErrInvalidRequest, "device_name holds a control character")
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
