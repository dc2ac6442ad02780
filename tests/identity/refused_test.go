//go:build booted

package boxidentity

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Each refused input leaves the old file and the hostname as they were:
// bad JSON; a key_id that does not match; a 31-byte key; a padded or
// standard-alphabet key; a box_id without cb-; a 1 MiB file; a name with
// '/', a space, or 64+ characters.
func TestEachRefusedInputLeavesFileAndHostname(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	good := record(t, boxID(1), "steady")
	mustWrite(t, b, good)
	waitHostname(t, b, "steady")
	before, err := b.ReadFile(identity.Path)
	if err != nil {
		t.Fatal(err)
	}

	edit := func(f func(r *identity.Identity)) []byte {
		r := *record(t, boxID(2), "changed")
		f(&r)
		return r.Marshal()
	}
	key31 := []byte("0123456789012345678901234567890")
	sum := sha256.Sum256(key31)
	// A key whose base64url form has '-' or '_', to write it in the
	// standard alphabet.
	std := record(t, boxID(2), "changed")
	for !strings.ContainsAny(std.PublicKey, "-_") {
		std = record(t, boxID(2), "changed")
	}
	std.PublicKey = strings.NewReplacer("-", "+", "_", "/").Replace(std.PublicKey)

	cases := []struct {
		name, field string
		data        []byte
	}{
		{"bad JSON", "file", []byte(`{"box_id":"cb-1","name":`)},
		{"key_id that does not match", "key_id", edit(func(r *identity.Identity) { r.KeyID = "0123456789abcdef" })},
		{"31-byte key", "public_key", edit(func(r *identity.Identity) {
			r.PublicKey = base64.RawURLEncoding.EncodeToString(key31)
			r.KeyID = identity.KeyID(sum[:0:0]) // any: the key fails first
		})},
		{"padded key", "public_key", edit(func(r *identity.Identity) { r.PublicKey += "=" })},
		{"standard-alphabet key", "public_key", std.Marshal()},
		{"box_id without cb-", "box_id", edit(func(r *identity.Identity) { r.BoxID = "0a1b2c3d" })},
		{"1 MiB file", "file", edit(func(r *identity.Identity) { r.WakeID = strings.Repeat("w", 1<<20) })},
		{"name with /", "name", edit(func(r *identity.Identity) { r.Name = "a/b" })},
		{"name with a space", "name", edit(func(r *identity.Identity) { r.Name = "a b" })},
		{"name of 64 characters", "name", edit(func(r *identity.Identity) { r.Name = strings.Repeat("n", 64) })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := write(t, b, c.data)
			if res.ExitCode != 65 {
				t.Errorf("identity write: exit %d, want 65 (invalid record); stderr %q", res.ExitCode, res.Stderr)
			}
			msg := strings.TrimSpace(res.Stderr)
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.field) {
				t.Errorf("stderr %q: want one line naming %q", msg, c.field)
			}
			after, err := b.ReadFile(identity.Path)
			if err != nil || string(after) != string(before) {
				t.Errorf("the identity file changed (%v):\n%s", err, after)
			}
			if got := kernelHostname(t, b); got != "steady" {
				t.Errorf("hostname is %q, want it to stay steady", got)
			}
		})
	}
	// Nothing ran the helper with a bad file: the last write was good.
	if got := strings.TrimSpace(b.Must(t, "cat", "/etc/hostname")); got != "steady" {
		t.Errorf("/etc/hostname = %q, want steady", got)
	}
}
