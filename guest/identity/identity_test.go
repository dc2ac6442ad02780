package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"filippo.io/edwards25519"
)

// newRecord returns a valid record with a fresh ed25519 key, as the api
// makes one.
func newRecord(t testing.TB, name string) *Identity {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Identity{BoxID: "cb-0a1b2c3d", WakeID: "w-7f3e9a", KeyID: KeyID(pub),
		PublicKey: EncodePublicKey(pub), Name: name}
}

func TestParseAcceptsAValidRecord(t *testing.T) {
	id := newRecord(t, "my_box")
	got, err := Parse(id.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if *got != *id {
		t.Fatalf("round trip: got %+v, want %+v", got, id)
	}
	// Field order and whitespace do not matter.
	got, err = Parse([]byte(` { "name":"` + id.Name + `", "public_key":"` + id.PublicKey + `","key_id":"` + id.KeyID +
		`","wake_id":"` + id.WakeID + `","box_id":"` + id.BoxID + `"}` + "\n\n"))
	if err != nil || *got != *id {
		t.Fatalf("reordered: %+v, %v", got, err)
	}
	if _, err := Parse(newRecord(t, "").Marshal()); err != nil {
		t.Fatalf("empty name refused: %v", err)
	}
}

// keyWith returns a record whose public_key encoding contains one of chars.
func keyWith(t *testing.T, chars string) *Identity {
	for i := 0; i < 1000; i++ {
		id := newRecord(t, "x")
		if strings.ContainsAny(id.PublicKey, chars) {
			return id
		}
	}
	t.Fatal("no key with " + chars)
	return nil
}

// notAPoint returns 32 bytes that are not an ed25519 point.
func notAPoint() []byte {
	for i := byte(0); ; i++ {
		sum := sha256.Sum256([]byte{i})
		if _, err := new(edwards25519.Point).SetBytes(sum[:]); err != nil {
			return sum[:]
		}
	}
}

func TestParseRefuses(t *testing.T) {
	good := newRecord(t, "box")
	edit := func(f func(id *Identity)) []byte {
		c := *good
		f(&c)
		return c.Marshal()
	}
	short := make([]byte, 31)
	copy(short, "0123456789012345678901234567890")
	padded := keyWith(t, "-_")
	bad := notAPoint()
	cases := []struct {
		name, field string
		data        []byte
	}{
		{"bad JSON", "file", []byte(`{"box_id":"cb-1",`)},
		{"not an object", "file", []byte(`["cb-1"]`)},
		{"empty", "file", nil},
		{"trailing data", "file", append(good.Marshal(), '{', '}')},
		{"unknown key", "file", []byte(strings.Replace(string(good.Marshal()), `"name"`, `"Name"`, 1))},
		{"duplicate key", "box_id", []byte(strings.Replace(string(good.Marshal()), `{`, `{"box_id":"cb-2",`, 1))},
		{"missing key", "name", []byte(strings.Replace(string(good.Marshal()), `,"name":"box"`, ``, 1))},
		{"number value", "name", []byte(strings.Replace(string(good.Marshal()), `"name":"box"`, `"name":7`, 1))},
		{"not UTF-8", "file", []byte(strings.Replace(string(good.Marshal()), `"box"`, "\"b\xffx\"", 1))},
		{"1 MiB file", "file", []byte(`{"name":"` + strings.Repeat("a", 1<<20) + `"}`)},
		{"key_id that does not match", "key_id", edit(func(id *Identity) { id.KeyID = "0000000000000000" })},
		{"key_id upper case", "key_id", edit(func(id *Identity) { id.KeyID = strings.ToUpper(id.KeyID) })},
		{"31-byte key", "public_key", edit(func(id *Identity) { id.PublicKey = EncodePublicKey(short); id.KeyID = KeyID(short) })},
		{"33-byte key", "public_key", edit(func(id *Identity) { k := append(short, 1, 2); id.PublicKey = EncodePublicKey(k); id.KeyID = KeyID(k) })},
		{"padded key", "public_key", edit(func(id *Identity) { id.PublicKey += "=" })},
		{"standard-alphabet key", "public_key", func() []byte {
			c := *padded
			c.PublicKey = strings.NewReplacer("-", "+", "_", "/").Replace(c.PublicKey)
			return c.Marshal()
		}()},
		{"standard base64 with padding", "public_key", edit(func(id *Identity) {
			id.PublicKey = base64.StdEncoding.EncodeToString(mustKey(t, id.PublicKey))
		})},
		{"non-canonical base64url", "public_key", edit(func(id *Identity) { id.PublicKey = nonCanonical(id.PublicKey) })},
		// The fuzzer's find (FuzzValidate, CI at stop 35): Go's base64
		// decoder skips line breaks even in Strict mode, so these decoded.
		{"key with a line break inside", "public_key", edit(func(id *Identity) { id.PublicKey = id.PublicKey[:20] + "\n" + id.PublicKey[20:] })},
		{"key with a CR LF at its end", "public_key", edit(func(id *Identity) { id.PublicKey += "\r\n" })},
		{"key with a line break for its last character", "public_key", edit(func(id *Identity) { id.PublicKey = id.PublicKey[:42] + "\n" })},
		{"32 bytes that are not a point", "public_key", edit(func(id *Identity) { id.PublicKey = EncodePublicKey(bad); id.KeyID = KeyID(bad) })},
		{"box_id without cb-", "box_id", edit(func(id *Identity) { id.BoxID = "0a1b2c3d" })},
		{"box_id only cb-", "box_id", edit(func(id *Identity) { id.BoxID = "cb-" })},
		{"box_id upper case", "box_id", edit(func(id *Identity) { id.BoxID = "cb-ABC" })},
		{"box_id with a dash", "box_id", edit(func(id *Identity) { id.BoxID = "cb-a-b" })},
		{"box_id 64 characters", "box_id", edit(func(id *Identity) { id.BoxID = "cb-" + strings.Repeat("a", 61) })},
		{"empty wake_id", "wake_id", edit(func(id *Identity) { id.WakeID = "" })},
		{"wake_id with a space", "wake_id", edit(func(id *Identity) { id.WakeID = "a b" })},
		{"wake_id 129 characters", "wake_id", edit(func(id *Identity) { id.WakeID = strings.Repeat("w", 129) })},
		{"name with /", "name", edit(func(id *Identity) { id.Name = "a/b" })},
		{"name with a space", "name", edit(func(id *Identity) { id.Name = "a b" })},
		{"name with a dot", "name", edit(func(id *Identity) { id.Name = "a.b" })},
		{"name of 64 characters", "name", edit(func(id *Identity) { id.Name = strings.Repeat("n", 64) })},
		{"name with NUL", "name", edit(func(id *Identity) { id.Name = "a\x00b" })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := Parse(c.data)
			if err == nil {
				t.Fatalf("accepted %+v", id)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not a FieldError", err)
			}
			if fe.Field != c.field {
				t.Fatalf("error %q names field %q, want %q", err, fe.Field, c.field)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func mustKey(t *testing.T, s string) []byte {
	k, err := DecodePublicKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// nonCanonical flips the unused low bits of the last character, which a
// lenient decoder ignores.
func nonCanonical(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[last^1])
}

func TestHostname(t *testing.T) {
	for _, c := range []struct{ name, want, err string }{
		{"box", "box", ""},
		{"my_box", "my-box", ""},
		{"My_Box_2", "My-Box-2", ""},
		{"", "cb-0a1b2c3d", ""},
		{strings.Repeat("a", 63), strings.Repeat("a", 63), ""},
		{"_box", "", "may not start or end"},
		{"box-", "", "may not start or end"},
		{"a/b", "", "letters, digits"},
	} {
		id := newRecord(t, c.name)
		got, err := id.Hostname()
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("Hostname(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Hostname(%q) = %q, %v; want an error with %q", c.name, got, err, c.err)
		}
	}
}
