// Package seal is the api's one sealing scheme for what it keeps of a
// user's (Contract: Key vault, Flow library, State objects (agent ↔ api)):
// a blob is nonce || AES-256-GCM(HKDF-SHA256(secret, label), plain, aad),
// with a 12-byte random nonce and the 16-byte tag at the end. The label
// names the kind of object (each kind gets its own key), the additional
// data names the object and its owner, so a blob moved to another row,
// key or user does not open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// KeySize is the length in bytes of the keys HKDF derives (AES-256).
const KeySize = 32

// Overhead is how many bytes Seal adds to the plain text: the nonce and
// the tag.
const Overhead = 12 + 16

// ErrOpen is a sealed blob that does not open: another secret, label or
// additional data, or altered bytes. It says nothing more on purpose.
var ErrOpen = errors.New("does not unseal")

// AEAD is AES-256-GCM under HKDF-SHA256(secret, nil salt, label). Callers
// sealing many objects of one kind derive it once.
func AEAD(secret []byte, label string) cipher.AEAD {
	k, err := hkdf.Key(sha256.New, secret, nil, label, KeySize)
	if err != nil {
		panic(err) // only for lengths HKDF-SHA256 cannot give; 32 it can
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		panic(err)
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return g
}

// Seal is nonce || AES-256-GCM(HKDF-SHA256(secret, label), plain, aad).
func Seal(secret []byte, label, aad string, plain []byte) []byte {
	return SealWith(AEAD(secret, label), aad, plain)
}

// SealWith seals plain under g (from AEAD) with aad.
func SealWith(g cipher.AEAD, aad string, plain []byte) []byte {
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	rand.Read(nonce)
	return g.Seal(nonce, nonce, plain, []byte(aad))
}

// Open opens what Seal made with the same secret, label and aad; anything
// else is ErrOpen.
func Open(secret []byte, label, aad string, sealed []byte) ([]byte, error) {
	return OpenWith(AEAD(secret, label), aad, sealed)
}

// OpenWith opens what SealWith made under the same g and aad.
func OpenWith(g cipher.AEAD, aad string, sealed []byte) ([]byte, error) {
	if len(sealed) < g.NonceSize()+g.Overhead() {
		return nil, ErrOpen
	}
	out, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], []byte(aad))
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
