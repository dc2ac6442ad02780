package signin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// PKCE (RFC 7636), the server's checks (the client's S256 is in
// api/client), S256 only: "plain" and a missing method are refused, since a
// plain challenge is the verifier itself and protects nothing from a local
// process that sees the authorize URL.

// isUnreserved reports whether c is in RFC 7636 §4.1's unreserved set
// ALPHA / DIGIT / "-" / "." / "_" / "~".
func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// CheckChallenge accepts a code_challenge that can be an S256 challenge:
// base64url without padding of a SHA-256, so 43 characters of [A-Za-z0-9-_]
// (RFC 7636 §4.2).
func CheckChallenge(challenge string) error {
	if len(challenge) != 43 {
		return fmt.Errorf("code_challenge must be the unpadded base64url SHA-256 of the verifier (43 characters), got %d characters", len(challenge))
	}
	// Checked before decoding: the decoder skips '\r' and '\n', even in
	// Strict mode.
	for i := 0; i < len(challenge); i++ {
		if c := challenge[i]; !isUnreserved(c) || c == '.' || c == '~' {
			return fmt.Errorf("code_challenge may hold only A-Z a-z 0-9 - _ (base64url, RFC 7636 §4.2), found %q at byte %d", c, i)
		}
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(challenge); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("code_challenge must be the unpadded base64url SHA-256 of the verifier: %q is not canonical", challenge)
	}
	return nil
}

// CheckVerifier accepts a code_verifier of RFC 7636 §4.1: 43 to 128
// characters of the unreserved set.
func CheckVerifier(verifier string) error {
	if len(verifier) < 43 || len(verifier) > 128 {
		return fmt.Errorf("code_verifier must be 43 to 128 characters (RFC 7636 §4.1), got %d", len(verifier))
	}
	for i := 0; i < len(verifier); i++ {
		if !isUnreserved(verifier[i]) {
			return fmt.Errorf("code_verifier may hold only A-Z a-z 0-9 - . _ ~ (RFC 7636 §4.1), found %q at byte %d", verifier[i], i)
		}
	}
	return nil
}

// VerifyPKCE checks a verifier against the challenge stored with the code
// (RFC 7636 §4.6), in constant time.
func VerifyPKCE(challenge, verifier string) error {
	if err := CheckVerifier(verifier); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(client.S256(verifier)), []byte(challenge)) != 1 {
		return fmt.Errorf("code_verifier does not match the code_challenge")
	}
	return nil
}
