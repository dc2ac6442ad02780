//go:build booted

package boxcli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// BenchmarkCLIEnsureFromHibernated is what a user waits for at a wake:
// `cocoonbox box ensure` of a hibernated box, the whole CLI process (its
// start, the call, following the operation through Events to done). Each
// round hibernates the box first, untimed. It reports p50 and p99 (make
// bench runs 20).
func BenchmarkCLIEnsureFromHibernated(b *testing.B) {
	benchBox(b)
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		benchOK(b, "box", "hibernate", "bench")
		b.StartTimer()
		start := time.Now()
		benchOK(b, "box", "ensure", "bench")
		took = append(took, time.Since(start))
	}
	latency.Report(b, "cli", took)
}

// BenchmarkCLICreateToRunning is `cocoonbox box create` to done (state
// running), the whole CLI process; each round deletes the box, untimed.
// spare creates the catalog's newest base image once the api's supervisor
// holds a booted spare of it (docs/box-lifecycle.md, Spares; the wait
// untimed); cold creates v1, which it keeps no spare of, so the box boots
// itself.
func BenchmarkCLICreateToRunning(b *testing.B) {
	for _, c := range []struct{ name, image string }{{"spare", "cbdesk:v2-base"}, {"cold", "cbdesk:v1-base"}} {
		b.Run(c.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				if c.name == "spare" {
					b.StopTimer()
					if _, err := harness.BootedSpare(context.Background(), filepath.Join(testDir, "machines"), "cbboxcli0"); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				start := time.Now()
				benchOK(b, "box", "create", "bench", "--image", c.image)
				took = append(took, time.Since(start))
				b.StopTimer()
				benchOK(b, "box", "delete", "bench", "--confirm")
				b.StartTimer()
			}
			latency.Report(b, "cli", took)
		})
	}
}

// benchBox creates the box "bench" (alice's max_boxes is 1: the tests'
// box is gone by then) and deletes it when the benchmark ends.
func benchBox(b *testing.B) {
	benchOK(b, "box", "create", "bench", "--image", "cbdesk:v1-base")
	b.Cleanup(func() { benchOK(b, "box", "delete", "bench", "--confirm") })
}

func benchOK(b *testing.B, args ...string) {
	b.Helper()
	// Not b.Context(): that ends before the cleanup's delete runs.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := alice.Run(ctx, "", args...)
	if err != nil {
		b.Fatalf("cocoonbox %v: %v\n%s", args, err, out)
	}
}
