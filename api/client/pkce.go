package client

import (
	"crypto/sha256"
	"encoding/base64"
)

// PKCE (RFC 7636), the client's half; the server's checks are in signin.

// MethodS256 is the only code_challenge_method accepted.
const MethodS256 = "S256"

// S256 is the challenge of a verifier: BASE64URL(SHA256(verifier)) (RFC 7636 §4.2).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
