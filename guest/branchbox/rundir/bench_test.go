package rundir

import (
	"fmt"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// BenchmarkCheck64Leases: Load (what `branchbox feature check` does) of an
// assignment with 64 leases: 32 model-identity leases and 32
// provider-environment leases, each with a digest-checked value file.
func BenchmarkCheck64Leases(b *testing.B) {
	r := branchboxtest.Lay(b, func(m map[string]any) { m["leases"] = []any{} })
	for i := range 32 {
		consumer := fmt.Sprintf("agent-%02d", i)
		r.Assignment["leases"] = append(r.Assignment["leases"].([]any),
			map[string]any{"lease_id": "model_" + consumer, "scope": "model-identity", "consumer": consumer, "executable": "provider-cli",
				"inherited_environment": []any{"MODEL_ACCESS_TOKEN"}, "expires_at": "2099-01-01T00:00:00Z", "materializations": []any{}},
			map[string]any{"lease_id": "env_" + consumer, "scope": "provider-environment", "consumer": consumer, "expires_at": "2099-01-01T00:00:00Z",
				"materializations": []any{map[string]any{"source_path": "/run/branchbox/managed/run-demo/materializations/" + consumer,
					"environment_name": "SOURCE_DELIVERY_TOKEN", "sha256": ""}}})
		r.SetValue(b, consumer, []byte("value-of-"+consumer))
	}
	if run, err := Load(options(r), branchboxtest.RunID); err != nil || len(run.Assignment.Leases) != 64 {
		b.Fatalf("%v", err)
	}
	for b.Loop() {
		if _, err := Load(options(r), branchboxtest.RunID); err != nil {
			b.Fatal(err)
		}
	}
}
