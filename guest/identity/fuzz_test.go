package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, what it accepts keeps the package doc's
// rules (oracleValid, written apart from Validate), the standard decoder
// reads the same record from it, and its canonical form parses back to it.
func FuzzParse(f *testing.F) {
	good := newRecord(f, "fuzz_box")
	f.Add(good.Marshal())
	f.Add([]byte(`{"box_id":"cb-1","wake_id":"w","key_id":"","public_key":"","name":""}`))
	f.Add([]byte(`{"box_id":"cb-1","box_id":"cb-2"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("refusal %v is not ErrInvalid", err)
			}
			return
		}
		if !oracleValid(*id) {
			t.Fatalf("Parse accepted %+v, which breaks the package doc's rules", *id)
		}
		var std Identity
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil || std != *id {
			t.Fatalf("encoding/json reads %+v (%v), Parse %+v", std, err, *id)
		}
		again, err := Parse(id.Marshal())
		if err != nil || *again != *id {
			t.Fatalf("canonical form does not round-trip: %v", err)
		}
		if _, err := id.Hostname(); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Hostname: %v", err)
		}
	})
}

// FuzzValidate: Validate accepts a record exactly when it keeps the
// package doc's rules (oracleValid), each field fuzzed on its own. FuzzParse
// rarely reaches a record Parse accepts; this target starts from one.
func FuzzValidate(f *testing.F) {
	good := newRecord(f, "fuzz_box")
	f.Add(good.BoxID, good.WakeID, good.KeyID, good.PublicKey, good.Name)
	f.Add("cb-"+strings.Repeat("a", 60), strings.Repeat("~", 128), good.KeyID, good.PublicKey, strings.Repeat("Z", 63))
	// One step over each rule's edge, one field at a time.
	for _, bad := range []Identity{
		{BoxID: "cb-" + strings.Repeat("a", 61)}, {BoxID: "cb-a.b"}, {BoxID: "cb-aB"}, {BoxID: "cb-"}, {BoxID: "CB-a"},
		{WakeID: strings.Repeat("w", 129)}, {WakeID: "w x"}, {WakeID: "w\x7f"}, {WakeID: "w\u00e9"},
		{KeyID: strings.ToUpper(good.KeyID)}, {KeyID: good.KeyID[:15]},
		{PublicKey: good.PublicKey + "="}, {PublicKey: strings.NewReplacer("-", "+", "_", "/").Replace(good.PublicKey) + "+"},
		{Name: strings.Repeat("n", 64)}, {Name: "a.b"}, {Name: "a b"},
	} {
		id := *good
		for _, f := range []struct {
			to *string
			v  string
		}{
			{&id.BoxID, bad.BoxID}, {&id.WakeID, bad.WakeID}, {&id.KeyID, bad.KeyID}, {&id.PublicKey, bad.PublicKey}, {&id.Name, bad.Name},
		} {
			if f.v != "" {
				*f.to = f.v
			}
		}
		f.Add(id.BoxID, id.WakeID, id.KeyID, id.PublicKey, id.Name)
	}
	f.Fuzz(func(t *testing.T, boxID, wakeID, keyID, publicKey, name string) {
		id := Identity{BoxID: boxID, WakeID: wakeID, KeyID: keyID, PublicKey: publicKey, Name: name}
		err := id.Validate()
		if want := oracleValid(id); (err == nil) != want {
			t.Fatalf("Validate(%+v) = %v, but the package doc's rules say valid=%v", id, err, want)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("refusal %v is not ErrInvalid", err)
		}
	})
}
