package packer

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/internal/clis"
)

// beginOnly is a box whose begin answers after half a second (a remote
// box's begin: the connection and its checks, which take none of this
// host's cores) and refuses, so an offload ends right after begin's
// answer and the account finding.
type beginOnly struct{}

func (beginOnly) Command(ctx context.Context, argv ...string) *exec.Cmd {
	script := `sleep 0.5; echo '{"ok":false,"code":"refused","error":"the benchmark stops after begin","findings":[],"cli":{"kind":"claude","account":"box@example.invalid"}}'; exit 3`
	return exec.CommandContext(ctx, "sh", "-c", script)
}

func (f beginOnly) Shell() string { return "false" }

// BenchmarkOffloadToBegin: an offload of a clone of this project's own
// repository up to begin's answer (setup, the host findings, begin, the
// account of the user's own claude here), with the real claude CLI (the
// npm install tests/setup-host keeps) here and a stand-in box whose
// begin takes half a second: the part of a small offload's fixed cost before the copy is
// sent (issue 39, Deliver 4). Reports the host's timings_ms of each step.
func BenchmarkOffloadToBegin(b *testing.B) {
	bin := filepath.Join(clis.Dir(b), "node_modules/.bin")
	b.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	b.Setenv("HOME", b.TempDir())
	self, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatal(err)
	}
	top := filepath.Join(b.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", strings.TrimSpace(string(self)), top).CombinedOutput(); err != nil {
		b.Fatalf("clone: %v: %s", err, out)
	}
	p := &Packer{Dirs: Dirs{Root: filepath.Join(b.TempDir(), "offload")}, Transport: beginOnly{},
		Box: BoxInfo{Name: "b", Image: "cbdesk:v22-base"}, Yes: true}
	key := RepoKey(top)
	if err := p.Dirs.Ensure(key); err != nil {
		b.Fatal(err)
	}
	write(b, p.Dirs.Repo(key), "handover.md", offloadtest.Handover("a benchmark's task"))
	sums := map[string]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		_, err := p.Offload(context.Background(), OffloadOptions{Dir: top, Kind: "claude"})
		sums["total"] += time.Since(t)
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Msg, "the benchmark stops after begin") {
			b.Fatalf("got %v, want begin's refusal", err)
		}
	}
	b.StopTimer()
	for k, v := range sums {
		b.ReportMetric(float64(v.Milliseconds())/float64(b.N), k+"-ms")
	}
}
