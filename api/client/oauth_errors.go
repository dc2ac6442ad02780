package client

// The OAuth 2.0 error codes used here (RFC 6749 §4.1.2.1 and §5.2).
const (
	ErrInvalidRequest          = "invalid_request"
	ErrAccessDenied            = "access_denied"
	ErrUnsupportedResponseType = "unsupported_response_type"
	ErrInvalidScope            = "invalid_scope"
	ErrServerError             = "server_error"
	ErrInvalidClient           = "invalid_client"
	ErrInvalidGrant            = "invalid_grant"
	ErrUnsupportedGrantType    = "unsupported_grant_type"
)
