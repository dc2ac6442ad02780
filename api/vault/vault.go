// Package vault is the key vault (Contract: Key vault; docs/key-vault.md):
// each user's own API keys, sealed in the api and put on every box of the
// user as host-only claim env entries, which the egress proxy swaps in for
// the key's placeholder on the key's hosts only.
//
// A value goes in once and never comes back out: it is a Secret, whose
// String, GoString, LogValue and MarshalJSON print its key's id only, and
// the one method that yields it (Reveal) is called where the value is
// sealed and where the claim env entry is rendered for a box.
//
// At rest: the api's master key (MasterKey, a file every replica is given)
// seals each user's state key (users.state_key_sealed, made on first use);
// each value is sealed with AES-256-GCM under HKDF-SHA256(state key,
// "cocoonbox vault value"), additional data vault_secrets|<id>|<owner>|value.
package vault

import (
	"embed"
	"log/slog"

	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (vault_secrets, vault_audit); they
// refer to users (users.Schema first).
var Schema = database.NewSchema("vault_schema_migrations", migrations, "migrations")

// Secret is a key's value. It prints as its key's id only (or "[secret]"
// before it has one), in fmt, slog and JSON alike: a value that reaches a
// log line or an answer by mistake shows nothing.
type Secret struct {
	id string
	v  string
}

// NewSecret wraps a value.
func NewSecret(v string) Secret { return Secret{v: v} }

// Reveal is the value itself: for sealing and for rendering a box's entry.
func (s Secret) Reveal() string { return s.v }

func (s Secret) String() string {
	if s.id == "" {
		return "[secret]"
	}
	return "[secret " + s.id + "]"
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return s.String() }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON implements json.Marshaler: the id only.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }
