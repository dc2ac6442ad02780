//go:build booted

package local

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// The benchmarks the issue asks for, reported as p50 and p99 in ms (and
// MiB/s): boot to running, wake with its new identity and machine-id, an
// exec's round trip and throughput, each beside a plain nsenter on the
// same box where there is one.

// BenchmarkBootToRunning: Create and Boot until systemd says running.
func BenchmarkBootToRunning(b *testing.B) {
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		m, err := sup.Create(ctx, sandbox.Spec{ID: newID("b"), Tenant: "bench", Image: v1})
		if err == nil {
			_, err = sup.Boot(ctx, m.ID)
		}
		ds = append(ds, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = sup.Delete(ctx, m.ID)
		b.StartTimer()
	}
	latency.Report(b, "boot", ds)
}

// BenchmarkWake: from hibernated to running with what the api does at a
// wake (Contract: Box identity, Journal): thaw, `identity write` of a new
// record, a new /etc/machine-id. The thaw alone is reported beside it.
func BenchmarkWake(b *testing.B) {
	ctx := context.Background()
	m := boot(b, v1)
	pub, _, _ := ed25519.GenerateKey(nil)
	var thaw, wake []time.Duration
	for b.Loop() {
		if _, err := sup.Hibernate(ctx, m.ID); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := sup.Wake(ctx, m.ID); err != nil {
			b.Fatal(err)
		}
		thaw = append(thaw, time.Since(start))
		id := identity.Identity{BoxID: "cb-bench", WakeID: randHex(16), KeyID: identity.KeyID(pub),
			PublicKey: identity.EncodePublicKey(pub), Name: "bench"}
		p, err := sup.Exec(ctx, m.ID, sandbox.ExecRequest{Args: []string{"/usr/local/lib/cocoonbox/identity", "write"}})
		if err != nil {
			b.Fatal(err)
		}
		st := drain(p, id.Marshal())
		if st.Code != 0 {
			b.Fatalf("identity write: %+v", st)
		}
		if err := sup.PutFile(ctx, m.ID, sandbox.File{Path: "/etc/machine-id", Data: []byte(randHex(16) + "\n"), Mode: 0o444}); err != nil {
			b.Fatal(err)
		}
		wake = append(wake, time.Since(start))
	}
	latency.Report(b, "thaw", thaw)
	latency.Report(b, "wake+identity+machine-id", wake)
}

// BenchmarkExecRoundTrip: `true` through Exec, and through a plain
// `nsenter -a` on the same box.
func BenchmarkExecRoundTrip(b *testing.B) {
	ctx := context.Background()
	m := boot(b, v1)
	var ours, plain []time.Duration
	for b.Loop() {
		start := time.Now()
		p, err := sup.Exec(ctx, m.ID, sandbox.ExecRequest{Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if st := drain(p, nil); st.Code != 0 {
			b.Fatal(st)
		}
		ours = append(ours, time.Since(start))
		start = time.Now()
		if err := exec.Command("nsenter", "-t", strconv.Itoa(m.Leader), "-a", "true").Run(); err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(start))
	}
	latency.Report(b, "exec", ours)
	latency.Report(b, "nsenter", plain)
}

// BenchmarkExecThroughput: 64 MiB through `cat` and back, by Exec and by a
// plain nsenter pipe on the same box, in MiB/s.
func BenchmarkExecThroughput(b *testing.B) {
	ctx := context.Background()
	m := boot(b, v1)
	data := make([]byte, 64<<20)
	_, _ = rand.Read(data)
	var ours, plain time.Duration
	for b.Loop() {
		start := time.Now()
		p, err := sup.Exec(ctx, m.ID, sandbox.ExecRequest{Args: []string{"cat"}})
		if err != nil {
			b.Fatal(err)
		}
		if st := drain(p, data); st.Code != 0 {
			b.Fatal(st)
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
	b.ReportMetric(mib/ours.Seconds(), "exec-MiB/s")
	b.ReportMetric(mib/plain.Seconds(), "nsenter-MiB/s")
}

// drain feeds stdin, reads both outputs to their end and waits.
func drain(p sandbox.Process, stdin []byte) sandbox.ExitStatus {
	go func() {
		_, _ = io.Copy(p.Stdin(), bytes.NewReader(stdin))
		p.Stdin().Close()
	}()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	_, _ = io.Copy(io.Discard, p.Stdout())
	st, err := p.Wait()
	if err != nil {
		return sandbox.ExitStatus{Code: -1, Signal: fmt.Sprint(err)}
	}
	return st
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
