package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// benchFiles and benchBytes are the home (Deliver 4 of issue 42):
// 10,000 files and 1 GB. COCOONBOX_STATE_BENCH_SCALE (a fraction, e.g.
// 0.1) shrinks both for a quick run; the report says the scale.
const (
	benchFiles = 10000
	benchBytes = 1 << 30
)

// benchTree writes a home of n files: 1% large (half the bytes, media and
// archives: incompressible), the rest small, half text that compresses
// and half random, in directories of 100.
func benchTree(b *testing.B, root string, n int, total int64) {
	r := rand.New(rand.NewChaCha8([32]byte{42}))
	large := max(n/100, 1)
	largeSize := total / 2 / int64(large)
	smallSize := total / 2 / int64(n-large)
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"a line of source\") } // and a comment\n"), int(2*smallSize/64)+2)
	for i := range n {
		dir := filepath.Join(root, "home/user", fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		size := smallSize/2 + r.Int64N(smallSize+1)
		data := text[:size]
		if i < large {
			size = largeSize
		}
		if i < large || i%2 == 1 {
			data = make([]byte, size)
			rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), 1}).Read(data)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// changeOnePercent rewrites 1% of the files: a small edit in the middle of
// each (a few bytes inserted), mtime moved, as an editor or a build does.
func changeOnePercent(b *testing.B, root string, n int) int64 {
	var changed int64
	for i := 0; i < n; i += 100 {
		p := filepath.Join(root, "home/user", fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d", i+7))
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		mid := len(data) / 2
		data = append(data[:mid:mid], append([]byte("/* edited */"), data[mid:]...)...)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		later := time.Now().Add(time.Minute)
		os.Chtimes(p, later, later)
		changed += int64(len(data))
	}
	return changed
}

func dirSize(b *testing.B, root string) int64 {
	var n int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func restic(b *testing.B, repo string, args ...string) {
	cmd := exec.Command("restic", append([]string{"--repo", repo, "--quiet", "--no-cache"}, args...)...)
	cmd.Env = append(os.Environ(), "RESTIC_PASSWORD=bench")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("restic %v: %v\n%s", args, err, out)
	}
}

func timed(f func()) float64 {
	start := time.Now()
	f()
	return time.Since(start).Seconds()
}

// BenchmarkSaveVersusRestic saves a home of 10,000 files and 1 GB into
// the embedded store, changes 1% of its files, saves it again and
// restores it; restic (Debian's, repository version 2 with its default
// compression) backs the same tree up into a local repository, again
// after the same change, and restores it, in the same run. Reported:
// seconds of each step, and the bytes the second save added to each
// store (the goal: fewer than restic's, and a restore no slower).
func BenchmarkSaveVersusRestic(b *testing.B) {
	if _, err := exec.LookPath("restic"); err != nil {
		b.Fatal("restic is missing: run make setup (tests/setup-host installs Debian's restic)")
	}
	scale := 1.0
	if v := os.Getenv("COCOONBOX_STATE_BENCH_SCALE"); v != "" {
		var err error
		if scale, err = strconv.ParseFloat(v, 64); err != nil || scale <= 0 || scale > 1 {
			b.Fatalf("COCOONBOX_STATE_BENCH_SCALE %q is not a fraction in (0, 1]", v)
		}
	}
	n, total := int(benchFiles*scale), int64(benchBytes*scale)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		work := b.TempDir()
		src := filepath.Join(work, "src")
		benchTree(b, src, n, total)
		treeBytes := dirSize(b, src)
		storeDir, repo := filepath.Join(work, "store"), filepath.Join(work, "restic")
		st, err := store.OpenDir(storeDir, "http://127.0.0.1:1", nil)
		if err != nil {
			b.Fatal(err)
		}
		k, err := objects.NewKeys("00000000-0000-4000-8000-0000000000be", bytes.Repeat([]byte{7}, 32))
		if err != nil {
			b.Fatal(err)
		}
		restic(b, repo, "init", "--repository-version", "2")
		b.StartTimer()

		var m1, m2 *objects.Manifest
		var s2 Stats
		ours1 := timed(func() {
			if m1, _, err = Save(ctx, st, k, src, []string{"home/user"}, "bench", "s1", nil, 0, Options{}); err != nil {
				b.Fatal(err)
			}
		})
		theirs1 := timed(func() { restic(b, repo, "backup", src) })
		storeAfter1, repoAfter1 := dirSize(b, storeDir), dirSize(b, repo)
		changed := changeOnePercent(b, src, n)
		ours2 := timed(func() {
			if m2, s2, err = Save(ctx, st, k, src, []string{"home/user"}, "bench", "s2", m1, 0, Options{}); err != nil {
				b.Fatal(err)
			}
		})
		theirs2 := timed(func() { restic(b, repo, "backup", src) })
		oursAdded, theirsAdded := dirSize(b, storeDir)-storeAfter1, dirSize(b, repo)-repoAfter1
		ourDst, theirDst := filepath.Join(work, "ours"), filepath.Join(work, "theirs")
		os.Mkdir(ourDst, 0o700)
		oursRestore := timed(func() {
			if _, err := Restore(ctx, st, k, m2, ourDst, nil); err != nil {
				b.Fatal(err)
			}
		})
		theirsRestore := timed(func() { restic(b, repo, "restore", "latest", "--target", theirDst) })
		b.StopTimer()
		if got := dirSize(b, filepath.Join(ourDst, "home/user")); got != dirSize(b, filepath.Join(src, "home/user")) {
			b.Fatalf("our restore holds %d bytes, the tree %d", got, dirSize(b, src))
		}
		b.ReportMetric(ours1, "save1-s")
		b.ReportMetric(theirs1, "restic-save1-s")
		b.ReportMetric(ours2, "save2-s")
		b.ReportMetric(theirs2, "restic-save2-s")
		b.ReportMetric(float64(oursAdded), "save2-bytes")
		b.ReportMetric(float64(theirsAdded), "restic-save2-bytes")
		b.ReportMetric(oursRestore, "restore-s")
		b.ReportMetric(theirsRestore, "restic-restore-s")
		b.Logf("scale %.2f: %d files, %d bytes; 1%% changed (%d files, %d bytes)", scale, n, treeBytes, n/100, changed)
		b.Logf("first save: ours %.1fs, %d bytes stored; restic %.1fs, %d bytes", ours1, storeAfter1, theirs1, repoAfter1)
		b.Logf("second save: ours %.1fs, %d bytes added (%d new chunks, %d files unread); restic %.1fs, %d bytes added", ours2, oursAdded, s2.NewChunks, s2.Unchanged, theirs2, theirsAdded)
		b.Logf("restore: ours %.1fs; restic %.1fs", oursRestore, theirsRestore)
		b.StartTimer()
	}
}
