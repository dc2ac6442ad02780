// Package latency reports a benchmark's latencies the way the issues ask
// for them: p50 and p99, in milliseconds, as custom benchmark metrics.
package latency

import (
	"slices"
	"testing"
	"time"
)

// Report adds name-p50-ms and name-p99-ms of ds (nearest rank below) to b;
// ds must not be empty.
func Report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(ms(Quantile(ds, 0.5)), name+"-p50-ms")
	b.ReportMetric(ms(Quantile(ds, 0.99)), name+"-p99-ms")
}

// Quantile is the q-quantile of ds (0 ≤ q ≤ 1, nearest rank below), ds
// left unsorted.
func Quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[int(q*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
