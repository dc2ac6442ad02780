package inbox_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// BenchmarkReadWaitWakeup: how long a read long-poll takes to return after
// a post lands, both through the inbox's socket (issue 12: p50, target
// under 20 ms). Each round: a read waits, then a post; the time is from
// the post's request to the read's answer.
func BenchmarkReadWaitWakeup(b *testing.B) {
	e := newEnv(b)
	var ds []time.Duration
	since := int64(0)
	for i := 0; i < b.N*20; i++ {
		got := make(chan time.Time, 1)
		go func() {
			offload.Call(e.paths.Socket, &offload.Request{Op: "read", Repo: "bench", Since: since, WaitMs: 10_000}, 20*time.Second)
			got <- time.Now()
		}()
		e.waitParked(1) // the read waits before the post; not part of the measure
		start := time.Now()
		resp, err := offload.Call(e.paths.Socket, &offload.Request{Op: "post", Repo: "bench", Kind: "question", Body: "q?"}, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		since = int64(resp["seq"].(float64))
		ds = append(ds, (<-got).Sub(start))
	}
	latency.Report(b, "read-wakeup", ds)
}

// BenchmarkMessageToPane: send --message to an idle session until the CLI
// (the stand-in) has it submitted, p50 over 50 messages.
func BenchmarkMessageToPane(b *testing.B) {
	e := newEnv(b)
	host := e.hostRepo("bm")
	if _, code := e.macSide(host, "bm", "bm", "claude", "off1"); code != 0 {
		b.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("bm"); return s == "idle", s })
	var ds []time.Duration
	for i := 0; i < 50*b.N; i++ {
		n := len(e.messages("claude"))
		start := time.Now()
		resp, err := offload.Call(e.paths.Socket, &offload.Request{Op: "send", Repo: "bm", Body: fmt.Sprintf("message %d", i)}, 10*time.Second)
		if err != nil || resp["delivery"] != "pasted" {
			b.Fatalf("send: %v %v", resp, err)
		}
		for len(e.messages("claude")) == n {
			time.Sleep(200 * time.Microsecond)
		}
		ds = append(ds, time.Since(start))
		e.waitFor("idle", func() (bool, string) { s := e.status("bm"); return s == "idle", s })
	}
	latency.Report(b, "message-to-pane", ds)
}

// BenchmarkSendLargeRepository: send of a 10,000-file repository's stream
// with a 50 MiB bundle; reports timings_ms of each step (the verb's own).
func BenchmarkSendLargeRepository(b *testing.B) {
	e := newEnv(b)
	host := filepath.Join(e.dir, "mac/big")
	os.MkdirAll(host, 0o755)
	git(b, host, "init", "-q")
	for i := 0; i < 10_000; i++ {
		d := filepath.Join(host, fmt.Sprintf("d%02d", i%100))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	blob := make([]byte, 50<<20) // random: the pack cannot compress it below 50 MiB
	rand.Read(blob)
	os.WriteFile(filepath.Join(host, "blob.bin"), blob, 0o644)
	git(b, host, "add", ".")
	git(b, host, "commit", "-q", "-m", "big")
	steps := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		key := fmt.Sprintf("big%d", i)
		resp, code := e.macSide(host, key, key, "claude", "off1")
		if code != 0 {
			b.Fatalf("send: %v", resp)
		}
		for k, v := range resp["timings_ms"].(map[string]any) {
			steps[k] = append(steps[k], v.(float64))
		}
		e.mustVerb(nil, "end", "--repo", key)
	}
	reportSteps(b, steps)
}

// BenchmarkBeginPreflight: begin of a new repository (the box half of
// the preflight: the tools in a login shell, the CLI's version and
// sign-in; then the copy taken), the fixed cost every offload waits on
// (issue 39, Deliver 4).
func BenchmarkBeginPreflight(b *testing.B) {
	e := newEnv(b)
	for i := 0; i < b.N; i++ {
		key := fmt.Sprintf("bp%d", i)
		e.mustVerb(nil, "begin", "--repo", key, "--name", key, "--kind", "claude", "--id", "off1")
	}
}

// BenchmarkSendSmallRepository: send of a small repository's stream (a
// few files, a small bundle), the fixed cost of every first offload in
// the box (issue 39, Deliver 4): reports timings_ms of each step, start
// (the CLI's session made) and accepted (the wait until it takes its
// first prompt) among them.
func BenchmarkSendSmallRepository(b *testing.B) {
	e := newEnv(b)
	host := e.hostRepo("small")
	steps := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		key := fmt.Sprintf("small%d", i)
		resp, code := e.macSide(host, key, key, "claude", fmt.Sprintf("off%d", i))
		if code != 0 || resp["accepted"] != true {
			b.Fatalf("send: exit %d, %v", code, resp)
		}
		for k, v := range resp["timings_ms"].(map[string]any) {
			steps[k] = append(steps[k], v.(float64))
		}
		e.mustVerb(nil, "end", "--repo", key)
	}
	reportSteps(b, steps)
}

// reportSteps reports each step's mean, in milliseconds, and logs them
// on one line.
func reportSteps(b *testing.B, steps map[string][]float64) {
	var names []string
	for k := range steps {
		names = append(names, k)
	}
	sort.Strings(names)
	var line bytes.Buffer
	for _, k := range names {
		sum := 0.0
		for _, v := range steps[k] {
			sum += v
		}
		b.ReportMetric(sum/float64(len(steps[k])), k+"-ms")
		fmt.Fprintf(&line, "%s=%.0f ", k, sum/float64(len(steps[k])))
	}
	b.Logf("timings_ms: %s", strings.TrimSpace(line.String()))
}
