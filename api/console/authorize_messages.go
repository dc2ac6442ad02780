package console

// AuthorizeMessage is the plain sentence a person reads on a consent page
// for a refused authorization request of OAuth error code (RFC 6749
// section 4.1.2.1's codes, RFC 8707's invalid_target). The request's
// error_description, which names its parameters and RFC sections, stays
// in the JSON answer and the redirect for the program that sent it
// (docs/console.md, Errors).
func AuthorizeMessage(code string) string {
	switch code {
	case "invalid_client", "unauthorized_client":
		return "This app is not one this service knows, or it may not ask for this sign-in. Start the sign-in again from the app; if it happens again, tell the app's maker."
	case "invalid_scope", "invalid_target":
		return "This app asked for access this service does not give. Start the sign-in again from the app; if it happens again, tell the app's maker."
	case "access_denied":
		return "You said no, so the app was not signed in."
	case "login_required":
		return "You are signed out. Sign in again."
	case "server_error":
		return "The api failed. Try again in a minute."
	default: // invalid_request, unsupported_response_type and any other
		return "The app sent a sign-in request this service cannot follow. Start the sign-in again from the app; if it happens again, tell the app's maker."
	}
}
