package vault

// The vault seals with package seal, the api's one scheme; these are its
// labels and additional data.

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

// valueAAD is a value's additional data (Contract: Key vault).
func valueAAD(id, owner string) string { return "vault_secrets|" + id + "|" + owner + "|value" }

// stateKeyAAD binds a sealed state key to its user row.
func stateKeyAAD(owner string) string { return "users|" + owner + "|state_key_sealed" }
