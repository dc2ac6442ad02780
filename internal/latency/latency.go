// Package latency reports a benchmark's latencies the way the issues ask
// for them: p50 and p99, in milliseconds, as custom benchmark metrics.
package latency

import (
	"math"
	"slices"
	"testing"
	"time"
)

// Report adds name-p50-ms and name-p99-ms of ds (nearest rank, see
// Quantile) to b; ds must not be empty.
func Report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(ms(Quantile(ds, 0.5)), name+"-p50-ms")
	b.ReportMetric(ms(Quantile(ds, 0.99)), name+"-p99-ms")
}

// Quantile is the q-quantile of ds (0 ≤ q ≤ 1) by the nearest-rank method:
// the ⌈q·n⌉-th smallest of the n samples (the smallest for q = 0), so the
// p99 of fewer than 100 samples is the largest: a report shows the worst
// run, never hides it. ds is left unsorted and must not be empty.
func Quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	// The epsilon keeps a product that float64 rounds up past a whole
	// number (0.07·100 = 7.000000000000001) on that number's rank.
	rank := int(math.Ceil(q*float64(len(s)) - 1e-9))
	return s[min(max(rank, 1), len(s))-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
