package cli

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// BenchmarkGRPCUnaryEndToEnd is one Account.ListDevices over gRPC (h2c) on
// loopback with a device token: the client, the token check, the handler
// and its query, the answer. For scale: connect-go on loopback is typically
// tens of µs.
func BenchmarkGRPCUnaryEndToEnd(b *testing.B) {
	e := newEnv(b)
	tok := e.device(e.console("alice"), "bench")
	acct := harness.Account(e.api.URL, tok)
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
		if _, err := harness.Account(a.URL, keeper).RevokeDevice(e.ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: id})); err != nil {
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

// BenchmarkGRPCUnaryRefused is the same call with a revoked token: the
// client, the token check's map lookup and the UNAUTHENTICATED answer, no
// query. It is the gRPC round trip on loopback that the token check adds to.
func BenchmarkGRPCUnaryRefused(b *testing.B) {
	e := newEnv(b)
	acct := harness.Account(e.api.URL, "cb_"+strings.Repeat("0", 64))
	req := connect.NewRequest(&controlv1.ListDevicesRequest{})
	for b.Loop() {
		if _, err := acct.ListDevices(e.ctx, req); connect.CodeOf(err) != connect.CodeUnauthenticated {
			b.Fatalf("%v, want UNAUTHENTICATED", err)
		}
	}
}

// nopAccount answers ListDevices with nothing: the peer of the benchmarks.
type nopAccount struct {
	controlv1connect.UnimplementedAccountHandler
}

func (nopAccount) ListDevices(context.Context, *connect.Request[controlv1.ListDevicesRequest]) (*connect.Response[controlv1.ListDevicesResponse], error) {
	return connect.NewResponse(&controlv1.ListDevicesResponse{}), nil
}

// BenchmarkGRPCUnaryPeer is the peer of the two above, run in the same
// process: a bare connect-go handler on an h2c loopback listener, no token
// check, no database, called by the same client.
func BenchmarkGRPCUnaryPeer(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle(controlv1connect.NewAccountHandler(nopAccount{}))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &p}
	go srv.Serve(ln)
	defer srv.Close()
	acct := harness.Account("http://"+ln.Addr().String(), "x")
	req := connect.NewRequest(&controlv1.ListDevicesRequest{})
	for b.Loop() {
		if _, err := acct.ListDevices(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
