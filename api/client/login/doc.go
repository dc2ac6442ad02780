// Package login is the cocoonbox CLI's side of the browser sign-in: the
// RFC 8252 loopback flow (a listener on 127.0.0.1:0, PKCE, the one
// callback that carries the code back), the code's exchange and the
// token's revocation (Start, Exchange, Revoke), and cli.json, where the
// CLI keeps the token of each endpoint with its source (Config).
//
// Like package client it holds no server code: the CLI links it without
// the api's server packages.
//
// Contract: Browser sign-in and device tokens.
package login
