//go:build booted

package boxidentity

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/latency"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// writes is how many identity writes the latency benchmark times (at least
// 100, as the issue asks).
const writes = 120

// BenchmarkIdentityWriteToKernelHostname: from the start of `identity
// write` to the kernel hostname changed, timed inside a booted box (so
// nsenter's cost is not counted) over `writes` writes; reports p50 and p99.
func BenchmarkIdentityWriteToKernelHostname(b *testing.B) {
	bx := box.Boot(b, box.Options{})
	tool := buildWritetime(b)
	if err := bx.CopyIn(tool, "/root/writetime", 0o755, "root"); err != nil {
		b.Fatal(err)
	}
	var recs strings.Builder
	for i := 0; i < writes; i++ {
		recs.Write(record(b, boxID(i), fmt.Sprintf("bench-%d", i)).Marshal())
	}
	b.ResetTimer()
	var lat []time.Duration
	for n := 0; n < b.N; n++ {
		res, err := bx.Exec(box.Cmd{Args: []string{"/root/writetime"}, Stdin: strings.NewReader(recs.String()), Timeout: 5 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("writetime: exit %d %v: %s", res.ExitCode, err, res.Stderr)
		}
		lat = append(lat, parseMicros(b, res.Stdout)...)
	}
	b.StopTimer()
	p50, p99 := latency.Quantile(lat, 0.5), latency.Quantile(lat, 0.99)
	b.ReportMetric(ms(p50), "ms-p50")
	b.ReportMetric(ms(p99), "ms-p99")
	b.Logf("identity write → kernel hostname: %d writes, p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		len(lat), ms(p50), ms(p99), ms(latency.Quantile(lat, 1)))
}

// BenchmarkCloudInitSetHostname times Debian's cloud-init applying a name
// (`cloud-init single --name set_hostname --frequency always`, NoCloud
// seed) and our identity write → kernel hostname side by side in the same
// box, interleaved (6 of ours, then one cloud-init apply, 20 rounds), so
// both see the same load; it reports both p50s and their ratio. It installs
// cloud-init from Debian's mirror first (minutes); when the mirror cannot
// be reached it skips, or fails under make (testenv.SkipOrFail).
func BenchmarkCloudInitSetHostname(b *testing.B) {
	bx := box.Boot(b, box.Options{})
	tool := buildWritetime(b)
	if err := bx.CopyIn(tool, "/root/writetime", 0o755, "root"); err != nil {
		b.Fatal(err)
	}
	res, err := bx.Exec(box.Cmd{Args: []string{"sh", "-c",
		"apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends cloud-init"},
		Timeout: 15 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		testenv.SkipOrFail(b, fmt.Sprintf("cannot install cloud-init (exit %d, %v): %s", res.ExitCode, err, tail(res.Stderr)))
	}
	version := strings.TrimSpace(bx.MustSh(b, "cloud-init --version 2>&1"))
	bx.MustSh(b, `set -e
mkdir -p /var/lib/cloud/seed/nocloud /etc/cloud/cloud.cfg.d
printf 'instance-id: cbbench-1\nlocal-hostname: ci-seed\n' >/var/lib/cloud/seed/nocloud/meta-data
printf '#cloud-config\n{}\n' >/var/lib/cloud/seed/nocloud/user-data
printf 'datasource_list: [ NoCloud ]\n' >/etc/cloud/cloud.cfg.d/99-cbbench.cfg
cloud-init init --local >/dev/null 2>&1 || cloud-init init >/dev/null 2>&1`)
	const rounds, ours = 20, 6
	// One cloud-init apply, timed in the box; its hostname is checked.
	apply := `set -e
printf 'hostname: ci-%d\n' "$1" >/root/h.cfg
t0=$(date +%s%N)
cloud-init -f /root/h.cfg single --name set_hostname --frequency always >/dev/null 2>&1
t1=$(date +%s%N)
[ "$(cat /proc/sys/kernel/hostname)" = "ci-$1" ] || { echo "hostname $(cat /proc/sys/kernel/hostname), want ci-$1" >&2; exit 1; }
echo $(( (t1 - t0) / 1000 ))`
	b.ResetTimer()
	var ci, our []time.Duration
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			var recs strings.Builder
			for i := 0; i < ours; i++ {
				recs.Write(record(b, boxID(i), fmt.Sprintf("ours-%d-%d", r, i)).Marshal())
			}
			res, err := bx.Exec(box.Cmd{Args: []string{"/root/writetime"}, Stdin: strings.NewReader(recs.String()), Timeout: 5 * time.Minute})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("writetime: exit %d %v: %s", res.ExitCode, err, res.Stderr)
			}
			our = append(our, parseMicros(b, res.Stdout)...)
			res, err = bx.Exec(box.Cmd{Args: []string{"bash", "-c", apply, "apply", strconv.Itoa(r)}, Timeout: 5 * time.Minute})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("cloud-init single: exit %d %v: %s", res.ExitCode, err, tail(res.Stderr))
			}
			ci = append(ci, parseMicros(b, res.Stdout)...)
		}
	}
	b.StopTimer()
	ciP50, ourP50 := latency.Quantile(ci, 0.5), latency.Quantile(our, 0.5)
	b.ReportMetric(ms(ciP50), "ms-p50-cloud-init")
	b.ReportMetric(ms(latency.Quantile(ci, 0.99)), "ms-p99-cloud-init")
	b.ReportMetric(ms(ourP50), "ms-p50-ours")
	b.ReportMetric(ms(latency.Quantile(our, 0.99)), "ms-p99-ours")
	b.ReportMetric(float64(ciP50)/float64(ourP50), "x-p50-ratio")
	b.Logf("%s set_hostname: %d applies, p50 %.1f ms, p99 %.1f ms; identity write → hostname in the same box: %d writes, p50 %.1f ms, p99 %.1f ms; ratio of p50s %.1f×",
		version, len(ci), ms(ciP50), ms(latency.Quantile(ci, 0.99)), len(our), ms(ourP50), ms(latency.Quantile(our, 0.99)), float64(ciP50)/float64(ourP50))
}

func buildWritetime(b *testing.B) string {
	out := filepath.Join(b.TempDir(), "writetime")
	cmd := exec.Command("go", "build", "-o", out, "./internal/writetime")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build writetime: %v\n%s", err, msg)
	}
	return out
}

func parseMicros(b *testing.B, out string) []time.Duration {
	var d []time.Duration
	for _, f := range strings.Fields(out) {
		us, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("bad latency %q", f)
		}
		d = append(d, time.Duration(us)*time.Microsecond)
	}
	if len(d) == 0 {
		b.Fatal("no latencies")
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}
