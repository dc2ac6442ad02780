package latency

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The nearest rank above: the ⌈q·n⌉-th smallest sample. Before the fix the
// p99 of 20 samples was the second largest and of 5 the fourth, so a report
// never showed the one slow run of a benchmark.
func TestQuantileIsTheNearestRankAbove(t *testing.T) {
	for _, c := range []struct {
		n    int
		q    float64
		rank int // 1-based: the rank-th smallest
	}{
		{1, 0, 1}, {1, 0.5, 1}, {1, 0.99, 1}, {1, 1, 1},
		{5, 0, 1}, {5, 0.5, 3}, {5, 0.99, 5}, {5, 1, 5},
		{20, 0, 1}, {20, 0.5, 10}, {20, 0.95, 19}, {20, 0.99, 20}, {20, 1, 20},
		{100, 0, 1}, {100, 0.07, 7}, {100, 0.5, 50}, {100, 0.99, 99}, {100, 1, 100},
	} {
		// Samples 1 ms .. n ms, shuffled: the rank-th smallest is rank ms.
		ds := make([]time.Duration, c.n)
		for i := range ds {
			ds[i] = time.Duration(i+1) * time.Millisecond
		}
		rand.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
		shuffled := append([]time.Duration(nil), ds...)
		if got, want := Quantile(ds, c.q), time.Duration(c.rank)*time.Millisecond; got != want {
			t.Errorf("Quantile of %d samples at %v = %v, want the %d-th smallest (%v)", c.n, c.q, got, c.rank, want)
		}
		for i := range ds {
			if ds[i] != shuffled[i] {
				t.Fatalf("Quantile sorted its input in place")
			}
		}
	}
}
