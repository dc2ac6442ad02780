//go:build booted

package session_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// Issue 11's benchmarks of rsh: `cocoonbox rsh true` as a user runs it (a
// process, the api's listener, the token check, Session.Exec, the local
// supervisor's nsenter into the box, runuser's login shell), and 64 MiB
// through `cat` and back, each beside a plain nsenter on the same box.

func BenchmarkRshTrueRoundTrip(b *testing.B) {
	var ours, plain []time.Duration
	for b.Loop() {
		start := time.Now()
		if out, err := rsh(context.Background(), nil, "--", "true").CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		ours = append(ours, time.Since(start))
		start = time.Now()
		if err := exec.Command("nsenter", "-t", strconv.Itoa(leader(b)), "-a", "true").Run(); err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(start))
	}
	latency.Report(b, "rsh-true", ours)
	latency.Report(b, "nsenter-true", plain)
}

func BenchmarkRshThroughput(b *testing.B) {
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	var ours, plain time.Duration
	for b.Loop() {
		var out countWriter
		cmd := rsh(context.Background(), nil, "--", "cat")
		cmd.Stdin, cmd.Stdout = bytes.NewReader(data), &out
		start := time.Now()
		if err := cmd.Run(); err != nil || out.n != len(data) {
			b.Fatal(out.n, err)
		}
		ours += time.Since(start)
		cmd = exec.Command("nsenter", "-t", strconv.Itoa(leader(b)), "-a", "cat")
		cmd.Stdin, cmd.Stdout = bytes.NewReader(data), io.Discard
		start = time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(start)
	}
	mib := float64(len(data)>>20) * float64(b.N)
	b.ReportMetric(mib/ours.Seconds(), "rsh-MiB/s")
	b.ReportMetric(mib/plain.Seconds(), "nsenter-MiB/s")
	b.ReportMetric(plain.Seconds()/ours.Seconds(), "rsh/nsenter")
}

type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
