package signin

import (
	"fmt"
)

// Error is an OAuth error: Code is one of the Err* codes, Description the
// human-readable error_description naming the parameter and the rule.
type Error struct {
	Code        string
	Description string
	// Redirect is true when the error may go back to the client's redirect
	// URI (RFC 6749 §4.1.2.1). It is false when the client or the redirect
	// URI itself is wrong: then the user sees an error page and nothing is
	// sent anywhere.
	Redirect bool
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// redirectable is an error of a request whose client and redirect URI are good.
func redirectable(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...), Redirect: true}
}
