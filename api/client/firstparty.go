package client

// The first-party clients (the cocoonbox CLI, the app) and their scope.
// Contract: Browser sign-in and device tokens.

// Scope is the only scope of the first-party clients: the whole account.
// No other client may ask for it, and they may ask for nothing else.
const Scope = "account"

// FirstParty is a first-party client: fixed here, never registered.
type FirstParty struct {
	// ID is the client_id, e.g. "cocoonbox-cli".
	ID string
	// Name is what the consent page calls it, e.g. "cocoonbox CLI".
	Name string
}

// The first-party clients of the contract. Their redirect URI is
// http://127.0.0.1:<any port>/callback (RFC 8252 §7.3), see CheckRedirectURI.
var (
	CLI = FirstParty{ID: "cocoonbox-cli", Name: "cocoonbox CLI"}
	App = FirstParty{ID: "cocoonbox-app", Name: "CocoonBox app"}
)

// LookupFirstParty returns the first-party client with this client_id, or false.
func LookupFirstParty(id string) (FirstParty, bool) {
	switch id {
	case CLI.ID:
		return CLI, true
	case App.ID:
		return App, true
	}
	return FirstParty{}, false
}
