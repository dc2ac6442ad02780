//go:build booted

package controlmcp

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// BenchmarkBoxStatusMCPAgainstGRPC is box_status of a running box through
// the real api's control MCP (the go-sdk client, one session) against
// Boxes.Status through gRPC, alternating, on the same api and box: p50 and
// p99 of each and the ratio of the p50s.
func BenchmarkBoxStatusMCPAgainstGRPC(b *testing.B) {
	h := start(b)
	c := mcptest.Connect(b, h.mcpURL, h.alice)
	c.OK(b, "box_ensure", nil)
	grpc := harness.Boxes(h.api.URL, h.alice)
	ctx := context.Background()
	req := connect.NewRequest(&controlv1.BoxStatusRequest{Box: "main"})
	var viaMCP, viaGRPC []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := c.Try(ctx, "box_status", map[string]any{"box": "main"})
		t1 := time.Now()
		if err != nil || res.IsError {
			b.Fatalf("box_status: %v %v", err, res)
		}
		if _, err := grpc.Status(ctx, req); err != nil {
			b.Fatal(err)
		}
		viaMCP, viaGRPC = append(viaMCP, t1.Sub(t0)), append(viaGRPC, time.Since(t1))
	}
	latency.Report(b, "mcp", viaMCP)
	latency.Report(b, "grpc", viaGRPC)
	b.ReportMetric(float64(latency.Quantile(viaMCP, 0.5))/float64(latency.Quantile(viaGRPC, 0.5)), "mcp/grpc-p50")
}

// BenchmarkBoxEnsureHibernatedThroughMCP is box_ensure of a hibernated box
// through the real api's control MCP, end to end: the call, the wake on
// the local supervisor, the operation's steps, the answer with the box
// running. The hibernate before each is outside the timing.
func BenchmarkBoxEnsureHibernatedThroughMCP(b *testing.B) {
	h := start(b)
	c := mcptest.Connect(b, h.mcpURL, h.alice)
	c.OK(b, "box_ensure", nil)
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		c.OK(b, "box_hibernate", nil)
		b.StartTimer()
		t0 := time.Now()
		got := c.OK(b, "box_ensure", nil)
		took = append(took, time.Since(t0))
		if got["state"] != "running" || got["operation_id"] == "" {
			b.Fatalf("box_ensure of the hibernated box: %v", got)
		}
	}
	latency.Report(b, "ensure", took)
}
