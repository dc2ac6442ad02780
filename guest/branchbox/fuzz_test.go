package branchbox

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse: Parse never panics, every refusal is a *RuleError, and what
// it accepts survives a round trip through encoding/json unchanged in
// meaning (it parses again).
func FuzzParse(f *testing.F) {
	f.Add(exampleBytes(f))
	f.Add([]byte(`{"version":"1"}`))
	f.Add([]byte(`{"version":"3","leases":null}`))
	f.Add([]byte(`{"version":"2","run_id":"a","run_id":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse(data, testOptions)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("refusal without a rule: %v", err)
			}
			return
		}
		again, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(again, testOptions); err != nil {
			t.Fatalf("accepted %q, refused its own encoding %q: %v", data, again, err)
		}
	})
}
