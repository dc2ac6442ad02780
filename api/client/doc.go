// Package client is what the api's clients (the cocoonbox CLI, the app)
// and the api's server agree on: the first-party clients and their scope,
// the authorize request's parameters and bounds, PKCE's S256, the OAuth
// error codes, the bearer interceptor of connect calls, the rules of a
// Session.Exec stream and where the control MCP answers. Both sides import
// it, so a name they share is defined once.
//
// It holds no server code: the CLI links it without the server's packages
// (PostgreSQL, migrations, the MCP SDK), which internal/deptest checks.
// The CLI's browser sign-in and its cli.json are package client/login.
//
// Contracts: Browser sign-in and device tokens; Remote command
// (Session.Exec, cocoonbox rsh); Control MCP.
package client
