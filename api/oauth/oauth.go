// Package oauth is the authorization server of third-party agents (claude,
// codex, any MCP client) for the control MCP: the MCP authorization of
// 2025-11-25. One file per endpoint, each following the RFC section it
// implements: metadata.go (RFC 8414, RFC 9728), register.go (RFC 7591),
// cimd.go and client.go (Client ID Metadata Documents), authorize.go (the
// consent page, OAuth 2.1 §4.1, RFC 9207), tokens.go (the token
// endpoint's authorization_code and refresh_token), revoke.go (RFC 7009);
// grants.go is the store and the in-memory index of access tokens, and
// grant.go the principal a cba_ token maps to.
//
// Contract: OAuth for agents (MCP authorization 2025-11-25); docs/oauth.md.
package oauth

// Where the endpoints answer on the api's listener, under the issuer.
const (
	// ResourcePath is the one protected resource: the control MCP and
	// every box MCP under it.
	ResourcePath = "/cocoonbox.mcp"
	// AuthorizationPath is the console's consent page.
	AuthorizationPath = "/cb/oauth/authorize"
	TokenPath         = "/cocoonbox.oauth/token"
	RegistrationPath  = "/cocoonbox.oauth/register"
	RevocationPath    = "/cocoonbox.oauth/revoke"

	// ASMetadataPath is RFC 8414 §3's well-known URI of an issuer with
	// no path.
	ASMetadataPath = "/.well-known/oauth-authorization-server"
	// PRMetadataPath is RFC 9728 §3.1's well-known URI of ResourcePath:
	// the well-known string inserted between the host and the path.
	PRMetadataPath = "/.well-known/oauth-protected-resource" + ResourcePath
)

// Scope is the one scope: the boxes the grant creates, on the MCPs.
const Scope = "boxes"
