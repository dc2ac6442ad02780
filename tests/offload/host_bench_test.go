//go:build booted

package offload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/packer"
)

// BenchmarkOffload10k (issue 13): a 10,000-file repository offloaded the
// first time, back with a fast-forward (the stand-in commits one file),
// offloaded again after 10 files changed (rsync and the bundle carry only
// what changed), back again; and the floor, the same tree moved by a
// plain rsync -az over the same transport into a fresh directory. Each
// step is reported in seconds (the mean over b.N rounds).
func BenchmarkOffload10k(b *testing.B) {
	r := newRig(b)
	sums := map[string]float64{}
	add := func(prefix string, ms map[string]int64) {
		for k, v := range ms {
			sums[prefix+"-"+k+"-s"] += float64(v) / 1000
		}
	}
	for i := 0; i < b.N; i++ {
		p := r.packer(b, b.TempDir())
		top, _ := repo(b, p, fmt.Sprintf("bench%d", i), "standin: commit")
		for d := 0; d < 100; d++ {
			for f := 0; f < 100; f++ {
				write(b, top, fmt.Sprintf("src/d%02d/f%02d.txt", d, f), fmt.Sprintf("file %d/%d of the benchmark\n", d, f))
			}
		}
		git(b, top, "add", ".")
		git(b, top, "commit", "-q", "-m", "10,000 files")
		ctx := context.Background()

		t := time.Now()
		res := offloadRepo(b, p, top)
		sums["offload1-total-s"] += time.Since(t).Seconds()
		add("offload1", res.Timings)
		t = time.Now()
		back, err := p.Back(ctx, top, false)
		if err != nil || back.Merge.Case != packer.CaseFastForward {
			b.Fatalf("back: %v %+v", err, back)
		}
		sums["back1-total-s"] += time.Since(t).Seconds()
		add("back1", back.Timings)

		for f := 0; f < 10; f++ {
			write(b, top, fmt.Sprintf("src/d%02d/f00.txt", f), "changed for the second offload\n")
		}
		t = time.Now()
		res = offloadRepo(b, p, top)
		sums["offload2-total-s"] += time.Since(t).Seconds()
		add("offload2", res.Timings)
		t = time.Now()
		if _, err := p.Back(ctx, top, false); err != nil {
			b.Fatalf("second back: %v", err)
		}
		sums["back2-total-s"] += time.Since(t).Seconds()

		t = time.Now()
		out, err := exec.Command("rsync", "-az", "-e", r.tr.Shell(), top+"/", fmt.Sprintf("box:/workspace/floor%d/", i)).CombinedOutput()
		if err != nil {
			b.Fatalf("plain rsync: %v: %s", err, out)
		}
		sums["floor-rsync-az-s"] += time.Since(t).Seconds()
		os.RemoveAll(filepath.Join(top, "src"))
	}
	for k, v := range sums {
		b.ReportMetric(v/float64(b.N), k)
	}
}
