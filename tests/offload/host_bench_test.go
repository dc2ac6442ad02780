//go:build booted

package offload

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
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

// BenchmarkFirstOffloadAndBack (issue 39, Deliver 4): the first offload
// and the back of a small real repository (a clone of this project's own,
// with uncommitted work) and of a large one (a generated history of
// $COCOONBOX_BENCH_LARGE_MB MiB of incompressible files, 500 by default),
// each beside the by-hand floor in the same run: rsync -az of the tree
// (the history left out) and then the history packed by git pack-objects
// and piped over the same transport into git index-pack --stdin in a
// fresh directory. Seconds per step (mean over b.N rounds), and the
// offload's multiple of the floor.
func BenchmarkFirstOffloadAndBack(b *testing.B) {
	r := newRig(b)
	large := 500
	if v := os.Getenv("COCOONBOX_BENCH_LARGE_MB"); v != "" {
		fmt.Sscan(v, &large)
	}
	for _, c := range []struct {
		name string
		make func(b *testing.B, top string)
	}{
		{"small-real", func(b *testing.B, top string) {
			self := git(b, ".", "rev-parse", "--show-toplevel")
			if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", self, top).CombinedOutput(); err != nil {
				b.Fatalf("clone %s: %v: %s", self, err, out)
			}
			write(b, top, "README.md", read(b, top, "README.md")+"\nan uncommitted line\n")
			write(b, top, "NOTES.txt", "untracked notes\n")
		}},
		{"large-generated", func(b *testing.B, top string) {
			git(b, "/", "init", "-q", top)
			data := make([]byte, 1<<20)
			for mb := 0; mb < large; mb++ {
				rand.Read(data)
				write(b, top, fmt.Sprintf("data/%03d/%04d.bin", mb/10, mb), string(data))
				if mb%10 == 9 || mb == large-1 {
					git(b, top, "add", ".")
					git(b, top, "-c", "user.name=bench", "-c", "user.email=bench@invalid", "commit", "-q", "-m", fmt.Sprintf("data up to %d MiB", mb+1))
				}
			}
			write(b, top, "data/uncommitted.txt", "uncommitted work\n")
		}},
	} {
		// The testing package calls the function again with a larger
		// b.N (once with 1, then -benchtime's), in the one box: each
		// round's copy, /workspace/<name>, is named by a count over all
		// the calls, or the second call's first round found its name
		// taken by the first call's ("the name small-real0 is taken").
		rounds := 0
		b.Run(c.name, func(b *testing.B) {
			sums := map[string]float64{}
			// Made once, copied for each round (each a first offload into a
			// copy of its own name).
			template := filepath.Join(b.TempDir(), c.name)
			c.make(b, template)
			for range b.N {
				i := rounds
				rounds++
				b.StopTimer()
				p := r.packer(b, b.TempDir())
				top := filepath.Join(b.TempDir(), fmt.Sprintf("%s%d", c.name, i))
				if out, err := exec.Command("cp", "-a", template, top).CombinedOutput(); err != nil {
					b.Fatalf("copy the repository: %v: %s", err, out)
				}
				key := packer.RepoKey(top)
				if err := p.Dirs.Ensure(key); err != nil {
					b.Fatal(err)
				}
				write(b, p.Dirs.Repo(key), "handover.md", offloadtest.Handover("a benchmark's task", "standin: commit"))
				b.StartTimer()
				ctx := context.Background()

				t := time.Now()
				res := offloadRepo(b, p, top)
				total := time.Since(t).Seconds()
				sums["offload-total-s"] += total
				// The host's steps (timings_ms) come one after another but
				// the bundle, made beside rsync: the two take the longer
				// of them. What the steps leave of the total is time no
				// step names.
				named := float64(max(res.Timings["rsync"], res.Timings["bundle"])) / 1000
				for k, v := range res.Timings {
					sums["offload-"+k+"-s"] += float64(v) / 1000
					if k != "bundle" && k != "rsync" {
						named += float64(v) / 1000
					}
				}
				sums["offload-unnamed-s"] += total - named
				// What send waits on in the box (read and index, check, the
				// CLI started, its first prompt taken): the fixed cost.
				for k, v := range res.BoxTimings {
					if ms, ok := v.(float64); ok {
						sums["offload-box-"+k+"-s"] += ms / 1000
					}
				}
				t = time.Now()
				if _, err := p.Back(ctx, top, false); err != nil {
					b.Fatalf("back: %v", err)
				}
				sums["back-total-s"] += time.Since(t).Seconds()

				floor := fmt.Sprintf("/workspace/floor-%s%d", c.name, i)
				t = time.Now()
				if out, err := exec.Command("rsync", "-az", "--exclude=/.git/objects/", "-e", r.tr.Shell(), top+"/", "box:"+floor+"/").CombinedOutput(); err != nil {
					b.Fatalf("the floor's rsync: %v: %s", err, out)
				}
				rs := time.Since(t).Seconds()
				t = time.Now()
				pack := exec.Command("git", "pack-objects", "--all", "--revs", "--stdout", "-q")
				pack.Dir = top
				pack.Stdin = strings.NewReader("")
				idx := r.tr.Command(ctx, "sh", "-c", "mkdir -p "+floor+"/.git/objects/pack && cd "+floor+" && git index-pack --stdin --fix-thin >/dev/null")
				pipe, err := pack.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				idx.Stdin = pipe
				if err := pack.Start(); err != nil {
					b.Fatal(err)
				}
				out, err := idx.CombinedOutput()
				if werr := pack.Wait(); err != nil || werr != nil {
					b.Fatalf("the floor's history over the transport: %v %v: %s", err, werr, out)
				}
				ps := time.Since(t).Seconds()
				sums["floor-rsync-s"] += rs
				sums["floor-history-s"] += ps
				sums["floor-s"] += rs + ps
				r.b.Must(b, "rm", "-rf", floor)
			}
			for k, v := range sums {
				b.ReportMetric(v/float64(b.N), k)
			}
			b.ReportMetric(sums["offload-total-s"]/sums["floor-s"], "offload-per-floor")
		})
	}
}
