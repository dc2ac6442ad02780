// Package tokens checks the bearer tokens of the api's calls: the personal
// token and the device tokens (cb_ + 64 hex), kept in one in-memory index
// per api so a check is one map lookup and never a query.
//
// Contract: Browser sign-in and device tokens.
package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
)

// Errors of Check, each a reason to refuse the call.
var (
	ErrNoBearer = errors.New("no bearer token: send Authorization: Bearer <token> (the personal token or a device token)")
	// ErrInviteToken: an invite-scoped token (cbit_) is refused before any lookup
	// (Contract: Sign-in with GitHub and signup, invite-scoped tokens).
	ErrInviteToken = errors.New("an invite-scoped token (cbit_) works only for the invite calls")
	// ErrAgentToken: an OAuth grant's access token (cba_, api/oauth) is
	// refused before any lookup: it works on the MCPs alone (Contract:
	// OAuth for agents, what a grant reaches).
	ErrAgentToken = errors.New("an agent's access token (cba_) works only on the MCPs it was granted")
	// ErrShareSecret: a share link's secret (cbs_, api/shares) is refused
	// before any lookup: it opens its share's screen on the share page
	// alone (Contract: Flows, "a share secret is no gRPC token at the
	// edge").
	ErrShareSecret = errors.New("a share link's secret (cbs_) is no token: it opens its share's screen on the share page alone")
	ErrMalformed   = errors.New("malformed token: a token is cb_ and 64 lowercase hex digits")
	ErrUnknown     = errors.New("unknown or revoked token: sign in again (cocoonbox login)")
)

// Prefix starts every personal and device token.
const Prefix = "cb_"

// Len is a token's length: cb_ and 64 hex digits.
const Len = len(Prefix) + 64

// Secret is a token's text. It prints as its prefix alone (String, LogValue),
// so a log line or an error never carries it.
type Secret string

// String is the secret's redacted form.
func (s Secret) String() string { return Prefix + "…" }

// LogValue is the secret's redacted form for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// New makes a token: its secret and the SHA-256 that is all the database keeps.
func New() (Secret, [32]byte) {
	var b [32]byte
	rand.Read(b[:])
	s := Prefix + hex.EncodeToString(b[:])
	return Secret(s), sha256.Sum256([]byte(s))
}

// parse checks a bearer's shape and answers its SHA-256, without allocating.
func parse(bearer string) ([32]byte, error) {
	if strings.HasPrefix(bearer, "cbit_") {
		return [32]byte{}, ErrInviteToken
	}
	if strings.HasPrefix(bearer, "cba_") {
		return [32]byte{}, ErrAgentToken
	}
	if strings.HasPrefix(bearer, "cbs_") {
		return [32]byte{}, ErrShareSecret
	}
	if len(bearer) != Len || bearer[:len(Prefix)] != Prefix {
		return [32]byte{}, ErrMalformed
	}
	for i := len(Prefix); i < Len; i++ {
		if c := bearer[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return [32]byte{}, ErrMalformed
		}
	}
	var buf [Len]byte
	copy(buf[:], bearer)
	return sha256.Sum256(buf[:]), nil
}
