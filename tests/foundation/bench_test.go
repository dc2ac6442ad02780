//go:build booted

package foundation

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

var userspace = regexp.MustCompile(`in ([0-9.]+)(ms|s) \(userspace\)|Startup finished in ([0-9.]+)(ms|s)`)

// BenchmarkBootToRunning boots throwaway boxes of the image and reports the
// userspace boot time systemd-analyze gives (target under 1 s) beside the
// wall time from starting systemd-nspawn to `running`.
func BenchmarkBootToRunning(b *testing.B) {
	img := box.Image(b)
	var wall, user time.Duration
	for i := 0; i < b.N; i++ {
		bx, err := box.Start(context.Background(), box.Options{Image: img})
		if err != nil {
			b.Fatal(err)
		}
		out, err := bx.Run("systemd-analyze", "time")
		bx.Stop()
		if err != nil {
			b.Fatal(err)
		}
		m := userspace.FindStringSubmatch(out)
		if m == nil {
			b.Fatalf("cannot read systemd-analyze time: %q", out)
		}
		v, unit := m[1], m[2]
		if v == "" {
			v, unit = m[3], m[4]
		}
		f, _ := strconv.ParseFloat(v, 64)
		if unit == "s" {
			f *= 1000
		}
		user += time.Duration(f * float64(time.Millisecond))
		wall += bx.Booted
	}
	b.ReportMetric(float64(user.Milliseconds())/float64(b.N), "ms-userspace/boot")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "ms-wall/boot")
}

// BenchmarkImageRebuild times image/build with the package layer cached,
// which is what a Go-only change costs (target under 30 s): copy the layer,
// provision, write the tar.
func BenchmarkImageRebuild(b *testing.B) {
	if err := box.CanBoot(); err != nil {
		testenv.SkipOrFail(b, err.Error())
	}
	root, err := box.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(filepath.Join(root, "image/build"), "--out", b.TempDir(), "--rev", "bench",
			"--bin", filepath.Join(root, "out/bin"))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("image/build: %v\n%s", err, out)
		}
	}
}
