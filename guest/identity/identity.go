// Package identity reads, validates and writes the box identity record,
// /run/cocoonbox-identity/identity, that the api writes through sandboxd at
// every boot and wake. Every helper (and the agent) reads it with Load; the
// identity writer (guest/cmd/identity) writes it with Write.
//
// Contract: Box identity (Guest (image) ↔ agent). The file is one JSON
// object with exactly five string fields:
//
//	{"box_id":"cb-…","wake_id":"…","key_id":"…","public_key":"…","name":"…"}
//
// The rules, all enforced by Parse (and Validate):
//
//   - box_id: "cb-" then 1 to 60 lowercase letters and digits ([a-z0-9]);
//     at most 63 bytes, so a box id is always a valid hostname label.
//   - wake_id: 1 to 128 printable ASCII characters without space
//     (0x21–0x7e). The api makes it random; helpers only log it.
//   - public_key: an ed25519 public key (a valid curve point), 32 bytes,
//     base64url WITHOUT padding, canonical (43 characters). Padding ('='),
//     the standard alphabet ('+', '/'), other lengths are refused.
//   - key_id: exactly the first 16 lowercase hex digits of SHA-256 over the
//     32 raw key bytes.
//   - name: the box name, empty or 1 to 63 of [A-Za-z0-9_-]. Its hostname
//     is Hostname's business (a name may be a valid box name and still not
//     map to a hostname, e.g. "-x").
//   - the whole file: at most MaxSize bytes, valid UTF-8, one object, all
//     five keys present once each, no other key, nothing after the object.
package identity

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"filippo.io/edwards25519"
)

// Where the record lives (Contract: Box identity): a tmpfs directory that is
// root's and 0755, the file root's and 0644.
const (
	Dir  = "/run/cocoonbox-identity"
	File = "identity"
	Path = Dir + "/" + File
)

// MaxSize bounds the file in bytes. A valid record is well under 512
// bytes; anything larger is refused before it is parsed.
const MaxSize = 4096

// Identity is the record. Its JSON form is the file's.
type Identity struct {
	BoxID     string `json:"box_id"`
	WakeID    string `json:"wake_id"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	Name      string `json:"name"`
}

// fields lists the record's keys in file order.
var fields = []string{"box_id", "wake_id", "key_id", "public_key", "name"}

// ErrInvalid is wrapped by every error about the record's content
// (*FieldError and the shape errors of Parse).
var ErrInvalid = errors.New("invalid identity")

// FieldError says which field broke which rule.
type FieldError struct {
	// Field is the JSON key ("box_id", ...), or "file" for the whole
	// record's shape (size, JSON syntax, keys).
	Field string
	// Rule is the rule it broke, in words ("must start with cb-").
	Rule string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// Parse decodes and validates a record strictly (the rules are in the
// package doc). The error is a *FieldError naming the field and the rule.
func Parse(data []byte) (*Identity, error) {
	if len(data) > MaxSize {
		return nil, invalid("file", "is %d bytes; the limit is %d", len(data), MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, invalid("file", "is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, invalid("file", "must be one JSON object")
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("file", "is not valid JSON: %v", err)
		}
		key, _ := tok.(string)
		if !known(key) {
			return nil, invalid("file", "has the unknown key %q; only %s are allowed", key, strings.Join(fields, ", "))
		}
		if _, dup := seen[key]; dup {
			return nil, invalid(key, "appears twice")
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, invalid("file", "is not valid JSON: %v", err)
		}
		val, ok := tok.(string)
		if !ok {
			return nil, invalid(key, "must be a JSON string")
		}
		seen[key] = val
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, invalid("file", "is not valid JSON: the object is not closed")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("file", "has data after the JSON object")
	}
	for _, f := range fields {
		if _, ok := seen[f]; !ok {
			return nil, invalid(f, "is missing")
		}
	}
	id := &Identity{BoxID: seen["box_id"], WakeID: seen["wake_id"], KeyID: seen["key_id"],
		PublicKey: seen["public_key"], Name: seen["name"]}
	if err := id.Validate(); err != nil {
		return nil, err
	}
	return id, nil
}

func known(key string) bool {
	for _, f := range fields {
		if key == f {
			return true
		}
	}
	return false
}

// Validate checks every field against its rule (package doc) and returns
// the first *FieldError, in file order.
func (id *Identity) Validate() error {
	if err := validBoxID(id.BoxID); err != nil {
		return err
	}
	if n := len(id.WakeID); n == 0 || n > 128 {
		return invalid("wake_id", "must be 1 to 128 characters (is %d)", n)
	}
	for _, c := range []byte(id.WakeID) {
		if c < 0x21 || c > 0x7e {
			return invalid("wake_id", "must be printable ASCII without spaces")
		}
	}
	key, err := DecodePublicKey(id.PublicKey)
	if err != nil {
		return err
	}
	if want := KeyID(key); id.KeyID != want {
		return invalid("key_id", "must be the first 16 lowercase hex digits of SHA-256 over the public key (%s), is %q", want, id.KeyID)
	}
	if n := len(id.Name); n > 63 {
		return invalid("name", "must be at most 63 characters (is %d)", n)
	}
	for _, c := range []byte(id.Name) {
		if !isAlnum(c) && c != '-' && c != '_' {
			return invalid("name", "may hold only letters, digits, '-' and '_' (found %q)", c)
		}
	}
	return nil
}

func validBoxID(s string) error {
	rest, ok := strings.CutPrefix(s, "cb-")
	if !ok {
		return invalid("box_id", "must start with cb- (is %q)", truncate(s))
	}
	if n := len(rest); n == 0 || n > 60 {
		return invalid("box_id", "must be cb- and 1 to 60 lowercase letters or digits (has %d after cb-)", n)
	}
	for _, c := range []byte(rest) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return invalid("box_id", "must be cb- and lowercase letters or digits only (found %q)", c)
		}
	}
	return nil
}

// DecodePublicKey decodes public_key: canonical base64url without padding
// of a 32-byte ed25519 point. The error is a *FieldError for public_key.
func DecodePublicKey(s string) ([]byte, error) {
	if strings.ContainsAny(s, "=") {
		return nil, invalid("public_key", "must be base64url without padding (has '=')")
	}
	if strings.ContainsAny(s, "+/") {
		return nil, invalid("public_key", "must be base64url ('-' and '_'), not standard base64 ('+' and '/')")
	}
	// The decoder skips '\r' and '\n' even in Strict mode, so a key with a
	// line break inside would decode; the rule is 43 characters of the
	// base64url alphabet, nothing else.
	if len(s) != 43 {
		return nil, invalid("public_key", "must be 43 characters of base64url (32 bytes), is %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' {
			return nil, invalid("public_key", "may hold only A-Z a-z 0-9 - _ (base64url), found %q at byte %d", c, i)
		}
	}
	key, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, invalid("public_key", "is not canonical base64url without padding: %v", err)
	}
	if len(key) != 32 {
		return nil, invalid("public_key", "must be 32 bytes (an ed25519 key), is %d", len(key))
	}
	if _, err := new(edwards25519.Point).SetBytes(key); err != nil {
		return nil, invalid("public_key", "is not an ed25519 public key (not a point on the curve)")
	}
	return key, nil
}

// EncodePublicKey is the public_key form of a 32-byte key.
func EncodePublicKey(key []byte) string { return base64.RawURLEncoding.EncodeToString(key) }

// KeyID is the key_id of a raw public key: the first 16 lowercase hex
// digits of its SHA-256.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// Marshal is the record's canonical file form: compact JSON in field
// order and a newline.
func (id *Identity) Marshal() []byte {
	data, _ := json.Marshal(id) // five strings: cannot fail
	return append(data, '\n')
}

// Hostname maps the record to the box's hostname (Contract: Box identity):
// the name with every '_' as '-', or the box id when the name is empty.
// The result must be one RFC 1123 label: 1 to 63 letters, digits and '-',
// not starting or ending with '-'. Names never exceed 63 characters (the
// record refuses them), so nothing is cut; a name that maps to no valid
// label (e.g. "_box", "box-") is refused with a *FieldError for name, and
// the caller keeps the previous hostname.
func (id *Identity) Hostname() (string, error) {
	if id.Name == "" {
		if err := validBoxID(id.BoxID); err != nil {
			return "", err
		}
		return id.BoxID, nil
	}
	h := strings.ReplaceAll(id.Name, "_", "-")
	if len(h) > 63 {
		return "", invalid("name", "maps to the hostname %q, longer than 63 characters", h)
	}
	for _, c := range []byte(h) {
		if !isAlnum(c) && c != '-' {
			return "", invalid("name", "maps to %q, which is not a hostname (letters, digits and '-' only)", h)
		}
	}
	if h[0] == '-' || h[len(h)-1] == '-' {
		return "", invalid("name", "maps to the hostname %q, which may not start or end with '-' (RFC 1123)", h)
	}
	return h, nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func truncate(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}
