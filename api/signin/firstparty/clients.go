// Package firstparty is what the first-party clients (the cocoonbox CLI,
// the app) and the sign-in server agree on: the clients and their scope, the
// authorize request's parameters and bounds, PKCE's S256, and the OAuth
// error codes. It holds no server code, so the CLI links it without the
// server's packages (PostgreSQL, migrations, the MCP SDK).
//
// Contract: Browser sign-in and device tokens.
package firstparty

// Scope is the only scope of the first-party clients: the whole account.
// No other client may ask for it, and they may ask for nothing else.
const Scope = "account"

// Client is a first-party client: fixed here, never registered.
type Client struct {
	// ID is the client_id, e.g. "cocoonbox-cli".
	ID string
	// Name is what the consent page calls it, e.g. "cocoonbox CLI".
	Name string
}

// The first-party clients of the contract. Their redirect URI is
// http://127.0.0.1:<any port>/callback (RFC 8252 §7.3), see CheckRedirectURI.
var (
	CLI = Client{ID: "cocoonbox-cli", Name: "cocoonbox CLI"}
	App = Client{ID: "cocoonbox-app", Name: "CocoonBox app"}
)

// LookupClient returns the first-party client with this client_id, or false.
func LookupClient(id string) (Client, bool) {
	switch id {
	case CLI.ID:
		return CLI, true
	case App.ID:
		return App, true
	}
	return Client{}, false
}
