package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

// The HKDF-SHA256 labels (info) of the keys derived for sealing.
const (
	// valueLabel derives a user's value key from the state key (Contract:
	// Key vault).
	valueLabel = "cocoonbox vault value"
	// stateKeyLabel derives the key sealing the state keys from the master
	// key (ours: the contract names the master key sealing them only).
	stateKeyLabel = "cocoonbox user state key"
)

// stateKeySize is a user's state key's length in bytes.
const stateKeySize = 32

// errUnseal is a sealed blob that does not open: another key, other
// additional data, or altered bytes.
var errUnseal = errors.New("does not unseal")

// valueAAD is a value's additional data (Contract: Key vault).
func valueAAD(id, owner string) string { return "vault_secrets|" + id + "|" + owner + "|value" }

// stateKeyAAD binds a sealed state key to its user row.
func stateKeyAAD(owner string) string { return "users|" + owner + "|state_key_sealed" }

func aead(secret []byte, label string) cipher.AEAD {
	k, err := hkdf.Key(sha256.New, secret, nil, label, 32)
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

// seal is nonce || AES-256-GCM(HKDF-SHA256(secret, label), plain, aad).
func seal(secret []byte, label, aad string, plain []byte) []byte {
	g := aead(secret, label)
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	rand.Read(nonce)
	return g.Seal(nonce, nonce, plain, []byte(aad))
}

// unseal opens what seal made with the same secret, label and aad.
func unseal(secret []byte, label, aad string, sealed []byte) ([]byte, error) {
	g := aead(secret, label)
	if len(sealed) < g.NonceSize()+g.Overhead() {
		return nil, errUnseal
	}
	out, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], []byte(aad))
	if err != nil {
		return nil, errUnseal
	}
	return out, nil
}
