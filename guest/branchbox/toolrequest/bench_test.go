package toolrequest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// BenchmarkDispatchRoundTrip (issue 15: dispatch round trip p50 over 100
// requests): from a finalized request in requests/ to the consumer's
// response file, through the claim, the durable replay record, the relay to
// a real Unix socket endpoint, the durable cached response and the
// response file: every fsync included. One op is 100 requests.
func BenchmarkDispatchRoundTrip(b *testing.B) {
	e := branchboxtest.NewEndpoint(b)
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		s := testSpool(b, e.Path, "")
		for j := range 100 {
			id := fmt.Sprintf("r%d-%d", i, j)
			write(b, s, id, request(id, `{"n":1}`))
			start := time.Now()
			if _, err := Dispatch(context.Background(), s, id, 10*time.Second); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
	}
	latency.Report(b, "dispatch", ds)
}
