package identity

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"regexp"

	"filippo.io/edwards25519"
)

// The package doc's rules written again, independently of Validate (as
// regular expressions, not its byte loops), so the fuzz targets compare
// the code with the rules instead of the code with itself.
var (
	oracleBoxID  = regexp.MustCompile(`^cb-[a-z0-9]{1,60}$`)
	oracleWakeID = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
	oracleKey    = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	oracleKeyID  = regexp.MustCompile(`^[0-9a-f]{16}$`)
	oracleName   = regexp.MustCompile(`^[A-Za-z0-9_-]{0,63}$`)
)

// oracleValid says whether id keeps every rule of the package doc. Only
// the curve-point test is the library's (edwards25519), as Validate's is.
func oracleValid(id Identity) bool {
	if !oracleBoxID.MatchString(id.BoxID) || !oracleWakeID.MatchString(id.WakeID) ||
		!oracleKey.MatchString(id.PublicKey) || !oracleKeyID.MatchString(id.KeyID) || !oracleName.MatchString(id.Name) {
		return false
	}
	// Strict: a last character with stray low bits is not the canonical
	// encoding of the 32 bytes.
	key, err := base64.RawURLEncoding.Strict().DecodeString(id.PublicKey)
	if err != nil || len(key) != 32 {
		return false
	}
	if _, err := new(edwards25519.Point).SetBytes(key); err != nil {
		return false
	}
	sum := sha256.Sum256(key)
	return id.KeyID == hex.EncodeToString(sum[:])[:16]
}
