package e2e

import (
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// BenchmarkGRPCUnaryEndToEnd is one Account.ListDevices over gRPC (h2c) on
// loopback with a device token: the client, the token check, the handler
// and its query, the answer. For scale: connect-go on loopback is typically
// tens of µs.
func BenchmarkGRPCUnaryEndToEnd(b *testing.B) {
	e := newEnv(b)
	tok := e.device(e.console("alice"), "bench")
	acct := Account(e.api.URL, tok)
	req := connect.NewRequest(&controlv1.ListDevicesRequest{})
	if _, err := acct.ListDevices(e.ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := acct.ListDevices(e.ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRevocationPropagation revokes a device on one api and measures
// how long until the other api, on the same PostgreSQL, refuses it (polled
// every 0.2 ms from the revoke's answer); it reports p50 and p99.
func BenchmarkRevocationPropagation(b *testing.B) {
	e := newEnv(b)
	a, other := e.api, e.start()
	c := e.console("alice")
	keeper := e.device(c, "keeper")
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		victim := e.device(c, "victim")
		id := e.deviceID(other.URL, victim)
		b.StartTimer()
		if _, err := Account(a.URL, keeper).RevokeDevice(e.ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: id})); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for {
			if ok, _ := e.refused(other.URL, victim); ok {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("the other api still accepts a device revoked 10 s ago")
			}
			time.Sleep(200 * time.Microsecond)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
