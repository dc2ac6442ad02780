package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse: Parse never panics, and what it accepts the validator
// accepts too, the standard decoder reads the same record from it, and its
// canonical form parses back to it.
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
		if err := id.Validate(); err != nil {
			t.Fatalf("Parse accepted what Validate refuses: %v", err)
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
