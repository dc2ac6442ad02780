// Package objects is the format of a save's objects in the state store
// (Contract: State objects (agent ↔ api); docs/state.md): content-defined
// chunks, deduplicated per user, and manifests (full or delta) that list a
// tree's paths with their metadata and chunks. Every object is sealed as
// the vault and the flow library seal theirs (package seal): AES-256-GCM
// under HKDF-SHA256(the user's state key, the kind's label), additional
// data state|<uid>|<kind>|<name>, so an object moved to another key or
// another user does not open.
package objects

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"

	"github.com/restic/chunker"

	"github.com/cocoonbox/cocoonbox/api/seal"
)

// The HKDF-SHA256 labels (info) of the keys derived from a user's state
// key, one per kind of object and one per other use.
const (
	ChunkLabel    = "cocoonbox state chunk"
	ManifestLabel = "cocoonbox state manifest"
	// chunkIDLabel keys the HMAC that names a chunk: a plain SHA-256 would
	// let whoever reads the store confirm that a user holds a known file.
	chunkIDLabel = "cocoonbox state chunk id"
	// chunkerLabel seeds the user's chunking polynomial (restic picks one
	// per repository for the same reason: boundaries of a fixed one leak
	// what a file holds to whoever sees the chunks' sizes).
	chunkerLabel = "cocoonbox state chunker"
)

// ErrCorrupt is an object that does not open under its user's key, name
// and kind, or whose content is not what its name says.
var ErrCorrupt = errors.New("corrupt or misplaced state object")

// Keys are one user's keys for state objects, derived once from the
// user's state key (vault.Store.StateKey).
type Keys struct {
	uid      string
	chunk    cipher.AEAD
	manifest cipher.AEAD
	id       []byte
	pol      chunker.Pol
}

// NewKeys derives uid's keys from stateKey (32 bytes).
func NewKeys(uid string, stateKey []byte) (*Keys, error) {
	if len(stateKey) != seal.KeySize {
		return nil, fmt.Errorf("state key of %s: %d bytes, want %d", uid, len(stateKey), seal.KeySize)
	}
	idKey, err := hkdf.Key(sha256.New, stateKey, nil, chunkIDLabel, 32)
	if err != nil {
		return nil, err
	}
	polKey, err := hkdf.Key(sha256.New, stateKey, nil, chunkerLabel, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(polKey)
	if err != nil {
		return nil, err
	}
	// An AES-CTR keystream is the endless deterministic source that
	// DerivePolynomial draws candidates from until one is irreducible.
	pol, err := chunker.DerivePolynomial(cipher.StreamReader{S: cipher.NewCTR(block, make([]byte, aes.BlockSize)), R: zeros{}})
	if err != nil {
		return nil, fmt.Errorf("the chunking polynomial of %s: %w", uid, err)
	}
	return &Keys{uid: uid, chunk: seal.AEAD(stateKey, ChunkLabel), manifest: seal.AEAD(stateKey, ManifestLabel), id: idKey, pol: pol}, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// UID is the user the keys are of.
func (k *Keys) UID() string { return k.uid }

// ChunkID names a chunk: hex HMAC-SHA256(HKDF(state key, "cocoonbox state
// chunk id"), plain), 64 digits. Equal content of one user has one name,
// so it is stored once.
func (k *Keys) ChunkID(plain []byte) string {
	m := hmac.New(sha256.New, k.id)
	m.Write(plain)
	return hex.EncodeToString(m.Sum(nil))
}

var (
	chunkIDRule = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// nameRule is a box's or a snapshot's name in a key: one store key
	// segment (store.CheckKey), at most 64 bytes.
	nameRule = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)
)

// CheckName says whether s is a box or snapshot name as keys hold them.
func CheckName(what, s string) error {
	if !nameRule.MatchString(s) {
		return fmt.Errorf("%s %q is not 1 to 64 of [A-Za-z0-9._-], not beginning with a dot", what, s)
	}
	return nil
}

// ChunksPrefix is the store prefix of uid's chunks.
func ChunksPrefix(uid string) string { return uid + "/state/chunks/" }

// ChunkKey is the store key of the chunk id: <uid>/state/chunks/<id[:2]>/<id>
// (the fan-out keeps Dir's directories small).
func (k *Keys) ChunkKey(id string) string { return ChunksPrefix(k.uid) + id[:2] + "/" + id }

// ManifestsPrefix is the store prefix of the manifests of uid's box.
func ManifestsPrefix(uid, box string) string { return AllManifestsPrefix(uid) + box + "/" }

// AllManifestsPrefix is the store prefix of the manifests of every box
// name of uid: <uid>/state/manifests/.
func AllManifestsPrefix(uid string) string { return uid + "/state/manifests/" }

// ManifestKey is the store key of box's snapshot's manifest:
// <uid>/state/manifests/<box>/<snapshot>.
func (k *Keys) ManifestKey(box, snapshot string) string {
	return ManifestsPrefix(k.uid, box) + snapshot
}

func (k *Keys) aad(kind, name string) string { return "state|" + k.uid + "|" + kind + "|" + name }
