//go:build booted

package offload

import (
	"fmt"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/latency"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// BenchmarkReadWaitWakeupInBox: the image's inbox unit, in a booted box,
// answers a read long-poll after a post lands (issue 12: p50, target
// under 20 ms). Both requests go to the box's socket from the host, so no
// process start is in the measure.
func BenchmarkReadWaitWakeupInBox(b *testing.B) {
	bx := boot(b, box.Options{})
	sock := bx.Root() + "/run/cocoonbox/offload.sock"
	var ds []time.Duration
	since := int64(0)
	for i := 0; i < 20*b.N; i++ {
		got := make(chan time.Time, 1)
		go func() {
			offload.Call(sock, &offload.Request{Op: "read", Repo: "bench", Since: since, WaitMs: 10_000}, 20*time.Second)
			got <- time.Now()
		}()
		// The read waits before the post (the status op's parked); not
		// part of the measure. A sleep let a late read be no long poll.
		box.Eventually(b, 10*time.Second, "the read parked", func() (bool, string) {
			resp, err := offload.Call(sock, &offload.Request{Op: "status"}, 10*time.Second)
			return err == nil && resp["parked"] == float64(1), fmt.Sprint(resp, err)
		})
		start := time.Now()
		resp, err := offload.Call(sock, &offload.Request{Op: "post", Repo: "bench", Kind: "question", Body: "q?"}, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		since = int64(resp["seq"].(float64))
		ds = append(ds, (<-got).Sub(start))
	}
	latency.Report(b, "read-wakeup", ds)
}
