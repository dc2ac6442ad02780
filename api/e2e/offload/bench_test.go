//go:build booted

package offload

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
)

// BenchmarkOffload10kThroughRsh (issue 13) is tests/offload's
// BenchmarkOffload10k as the user runs it: the cocoonbox CLI, every Exec
// through cocoonbox rsh and the api's Session.Exec. A 10,000-file
// repository offloaded the first time, back (a fast-forward), offloaded
// again after 10 files changed, back; the floor is a plain rsync -az of
// the same tree over the same cocoonbox rsh. Seconds per step, the mean
// over b.N rounds.
// rounds counts the benchmark's rounds in this process.
var rounds int

func BenchmarkOffload10kThroughRsh(b *testing.B) {
	sums := map[string]float64{}
	add := func(prefix string, resp map[string]any) {
		ms, _ := resp["timings_ms"].(map[string]any)
		for k, v := range ms {
			f, _ := v.(float64)
			sums[prefix+"-"+k+"-s"] += f / 1000
		}
	}
	timed := func(name string, f func()) {
		t := time.Now()
		f()
		sums[name+"-total-s"] += time.Since(t).Seconds()
	}
	for range b.N {
		// The box is the package's, kept across rounds and runs of the
		// benchmark: each round's copy is a name of its own.
		rounds++
		i := rounds
		data := b.TempDir()
		top := filepath.Join(b.TempDir(), fmt.Sprintf("bench%d", i))
		os.MkdirAll(top, 0o755)
		git(b, top, "init", "-q")
		for d := 0; d < 100; d++ {
			os.MkdirAll(filepath.Join(top, fmt.Sprintf("src/d%02d", d)), 0o755)
			for f := 0; f < 100; f++ {
				write(b, top, fmt.Sprintf("src/d%02d/f%02d.txt", d, f), fmt.Sprintf("file %d/%d of the benchmark\n", d, f))
			}
		}
		git(b, top, "add", ".")
		git(b, top, "commit", "-q", "-m", "10,000 files")
		path := mustCLI(b, top, data, "offload", "handover-path")["stdout"].(string)
		os.WriteFile(path[:len(path)-1], []byte(offloadtest.Handover("bench", "standin: commit")), 0o600)

		timed("offload1", func() { add("offload1", mustCLI(b, top, data, "offload", "--box", boxName, "--yes", "--json")) })
		timed("back1", func() { add("back1", mustCLI(b, top, data, "back", "--json")) })
		for f := 0; f < 10; f++ {
			write(b, top, fmt.Sprintf("src/d%02d/f00.txt", f), "changed for the second offload\n")
		}
		timed("offload2", func() { add("offload2", mustCLI(b, top, data, "offload", "--box", boxName, "--yes", "--json")) })
		timed("back2", func() { mustCLI(b, top, data, "back", "--json") })
		timed("floor-rsync-az", func() {
			cmd := exec.Command("rsync", "-az", "-e", bins.CLI+" rsh --box "+boxName, top+"/", fmt.Sprintf("box:/workspace/floor%d/", i))
			cmd.Env = cliEnv(data)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("plain rsync over cocoonbox rsh: %v: %s", err, out)
			}
		})
	}
	for k, v := range sums {
		b.ReportMetric(v/float64(b.N), k)
	}
}
