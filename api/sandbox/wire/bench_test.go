//go:build booted

package wire

import (
	"bytes"
	"crypto/rand"
	"io"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// What rsh will cost (Remote command): `true` and 64 MiB through `cat`
// over the daemon's wire, each beside a plain nsenter on the same box.

func BenchmarkWireExecRoundTrip(b *testing.B) {
	m := boot(b)
	var ours, plain []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, _, st := execAll(b, m.ID, nil, "true"); st.Code != 0 {
			b.Fatal(st)
		}
		ours = append(ours, time.Since(start))
		start = time.Now()
		if err := exec.Command("nsenter", "-t", strconv.Itoa(m.Leader), "-a", "true").Run(); err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(start))
	}
	latency.Report(b, "wire-exec", ours)
	latency.Report(b, "nsenter", plain)
}

func BenchmarkWireExecThroughput(b *testing.B) {
	m := boot(b)
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	var ours, plain time.Duration
	for b.Loop() {
		start := time.Now()
		if n, _, st := execAll(b, m.ID, data, "cat"); st.Code != 0 || n != int64(len(data)) {
			b.Fatal(n, st)
		}
		ours += time.Since(start)
		start = time.Now()
		cmd := exec.Command("nsenter", "-t", strconv.Itoa(m.Leader), "-a", "cat")
		cmd.Stdin, cmd.Stdout = bytes.NewReader(data), io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(start)
	}
	mib := float64(len(data)>>20) * float64(b.N)
	b.ReportMetric(mib/ours.Seconds(), "wire-exec-MiB/s")
	b.ReportMetric(mib/plain.Seconds(), "nsenter-MiB/s")
}
