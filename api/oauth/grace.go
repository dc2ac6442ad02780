package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// RefreshGrace is the refresh grace window: a spent refresh token
// presented again by its own client within this time of its use answers
// the same new pair its first use answered, instead of revoking the grant
// (OAuth 2.1 §4.3.1's replay detection still applies after it).
//
// Why 30 s: agents that share one credential across processes (claude
// code's issue 91641) refresh at once when the access token expires, and
// a client whose answer was lost retries; both come within seconds. A
// stolen token is replayed after the client used it, and every second of
// the window is a second in which a thief who also knows the client_id
// gets the pair instead of ending the family; Okta's default grace period
// for rotation is the same 30 s (Auth0's "reuse interval" is set per
// tenant). docs/oauth.md, Tokens.
const RefreshGrace = 30 * time.Second

// successor is the pair a refresh answered, kept sealed beside the spent
// refresh token for RefreshGrace.
type successor struct {
	AccessToken   string    `json:"a"`
	RefreshToken  string    `json:"r"`
	AccessExpires time.Time `json:"e"`
}

// successorKey is the AES-256 key that seals the pair a refresh token's
// refresh answered: HMAC-SHA256 under oauth_key of the refresh token with
// a label, so neither the database alone (it keeps the digest, another
// HMAC) nor anyone without that refresh token can open it.
func (s *Grants) successorKey(refreshToken string) []byte {
	m := hmac.New(sha256.New, s.key)
	io.WriteString(m, "cocoonbox refresh successor\x00")
	io.WriteString(m, refreshToken)
	return m.Sum(nil)
}

// seal encrypts next under refreshToken's successorKey (nonce first).
func (s *Grants) seal(refreshToken string, next successor) ([]byte, error) {
	gcm, err := s.successorAEAD(refreshToken)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	rand.Read(nonce)
	return gcm.Seal(nonce, nonce, plain, nil), nil
}

// open decrypts what seal made for refreshToken.
func (s *Grants) open(refreshToken string, sealed []byte) (successor, error) {
	gcm, err := s.successorAEAD(refreshToken)
	if err != nil {
		return successor{}, err
	}
	if len(sealed) < gcm.NonceSize() {
		return successor{}, errors.New("the sealed successor is too short")
	}
	plain, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
	if err != nil {
		return successor{}, err
	}
	var next successor
	return next, json.Unmarshal(plain, &next)
}

func (s *Grants) successorAEAD(refreshToken string) (cipher.AEAD, error) {
	block, err := aes.NewCipher(s.successorKey(refreshToken))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
