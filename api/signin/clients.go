// Package signin is the authorization server of the first-party clients: the
// RFC 8252 loopback browser sign-in of the cocoonbox CLI and the app, from the
// consent page to the device token. One file per endpoint, each following the
// RFC section it implements.
//
// Contract: Browser sign-in and device tokens.
package signin

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
