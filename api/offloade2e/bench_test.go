package offloade2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/offloadtest"
	"github.com/cocoonbox/cocoonbox/tests/offloadbox"
)

// BenchmarkOffload10kThroughRsh (issue 13) is tests/packer's
// BenchmarkOffload10k as the user runs it: the cocoonbox CLI, every Exec
// through cocoonbox rsh and the api's Session.Exec. A 10,000-file
// repository offloaded the first time, back (a fast-forward), offloaded
// again after 10 files changed, back; the floor is a plain rsync -az of
// the same tree over the same cocoonbox rsh. Seconds per step, the mean
// over b.N rounds.
func BenchmarkOffload10kThroughRsh(b *testing.B) {
	a := newAPI(b, "bench")
	standin, err := offloadbox.BuildStandin()
	if err != nil {
		b.Fatal(err)
	}
	bin, _ := os.ReadFile(standin)
	a.inBox(b, bin, "install -d -o user -g user /home/user/.local /home/user/.local/bin && "+
		"cat >/home/user/.local/bin/claude && chown user:user /home/user/.local/bin/claude && chmod 755 /home/user/.local/bin/claude")
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
	for i := 0; i < b.N; i++ {
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
		path := a.mustCLI(b, top, data, "offload", "handover-path")["stdout"].(string)
		os.WriteFile(path[:len(path)-1], []byte(offloadtest.Handover("bench", "standin: commit")), 0o600)

		timed("offload1", func() { add("offload1", a.mustCLI(b, top, data, "offload", "--box", "bench", "--yes", "--json")) })
		timed("back1", func() { add("back1", a.mustCLI(b, top, data, "back", "--json")) })
		for f := 0; f < 10; f++ {
			write(b, top, fmt.Sprintf("src/d%02d/f00.txt", f), "changed for the second offload\n")
		}
		timed("offload2", func() { add("offload2", a.mustCLI(b, top, data, "offload", "--box", "bench", "--yes", "--json")) })
		timed("back2", func() { a.mustCLI(b, top, data, "back", "--json") })
		timed("floor-rsync-az", func() {
			cmd := exec.Command("rsync", "-az", "-e", cliBin+" rsh --box bench", top+"/", fmt.Sprintf("box:/workspace/floor%d/", i))
			cmd.Env = append(os.Environ(), "COCOONBOX_ENDPOINT="+a.endpoint, "COCOONBOX_TOKEN="+token, "XDG_CONFIG_HOME="+data)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("plain rsync over cocoonbox rsh: %v: %s", err, out)
			}
		})
	}
	for k, v := range sums {
		b.ReportMetric(v/float64(b.N), k)
	}
}
