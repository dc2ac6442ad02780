package mcp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/latency"
)

// BenchmarkBoxStatus is box_status's round trip through the MCP (the
// go-sdk client, one session) against Boxes.Status through gRPC (h2c),
// both on one listener, token check and service alike (the service in
// memory, so the figures are the protocols' own cost; api/e2e/cli measures
// the real api's). It reports p50 and p99 of each, and mcp/grpc.
func BenchmarkBoxStatus(b *testing.B) {
	e := newEnv(b)
	c := e.connect(e.aliceToken)
	c.OK(b, "box_create", map[string]any{"name": "dev"})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	grpc := controlv1connect.NewBoxesClient(&http.Client{Transport: &http.Transport{Protocols: &p}}, e.base, connect.WithGRPC())
	ctx := context.Background()
	status := func() error {
		req := connect.NewRequest(&controlv1.BoxStatusRequest{Box: "dev"})
		req.Header().Set("Authorization", "Bearer "+string(e.aliceToken))
		_, err := grpc.Status(ctx, req)
		return err
	}
	if err := status(); err != nil {
		b.Fatal(err)
	}
	var viaMCP, viaGRPC []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		res, err := c.Try(ctx, "box_status", map[string]any{"box": "dev"})
		t1 := time.Now()
		if err != nil || res.IsError {
			b.Fatalf("box_status: %v %v", err, res)
		}
		if err := status(); err != nil {
			b.Fatal(err)
		}
		viaMCP, viaGRPC = append(viaMCP, t1.Sub(t0)), append(viaGRPC, time.Since(t1))
	}
	b.StopTimer()
	latency.Report(b, "mcp", viaMCP)
	latency.Report(b, "grpc", viaGRPC)
	b.ReportMetric(float64(latency.Quantile(viaMCP, 0.5))/float64(latency.Quantile(viaGRPC, 0.5)), "mcp/grpc-p50")
}
