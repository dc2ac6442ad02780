package tokens

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// account answers ListDevices with the caller's user name and streams
// WatchDevices until its context ends: enough to see the interceptor work.
type account struct {
	controlv1connect.UnimplementedAccountHandler
}

func (account) ListDevices(ctx context.Context, _ *connect.Request[controlv1.ListDevicesRequest]) (*connect.Response[controlv1.ListDevicesResponse], error) {
	p, _ := FromContext(ctx)
	return connect.NewResponse(&controlv1.ListDevicesResponse{Devices: []*controlv1.Device{{Id: p.DeviceID, Label: p.UserName}}}), nil
}

func (account) WatchDevices(ctx context.Context, _ *connect.Request[controlv1.WatchDevicesRequest], s *connect.ServerStream[controlv1.WatchDevicesResponse]) error {
	if err := s.Send(&controlv1.WatchDevicesResponse{}); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// serve runs the api's server with the Account service behind the interceptor
// and a plain HTTP route behind Require; it answers the base URL.
func serve(t *testing.T, ix *Index) string {
	t.Helper()
	s := server.New(slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	s.Handle(controlv1connect.NewAccountHandler(account{}, connect.WithInterceptors(ix.Interceptor())))
	s.Handle("GET /me", ix.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := FromContext(r.Context())
		w.Write([]byte(p.UserName))
	})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return "http://" + ln.Addr().String()
}

func grpcClient(base string) controlv1connect.AccountClient {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return controlv1connect.NewAccountClient(&http.Client{Transport: &http.Transport{Protocols: &p}}, base, connect.WithGRPC())
}

func bearerHeader[T any](req *connect.Request[T], tok string) *connect.Request[T] {
	if tok != "" {
		req.Header().Set("Authorization", "Bearer "+tok)
	}
	return req
}

func TestInterceptorRefusesBadBearersUnauthenticated(t *testing.T) {
	t.Parallel()
	_, _, dev, ix := setup(t)
	c := grpcClient(serve(t, ix))
	ctx := context.Background()
	resp, err := c.ListDevices(ctx, bearerHeader(connect.NewRequest(&controlv1.ListDevicesRequest{}), string(dev)))
	if err != nil || resp.Msg.Devices[0].Label != "alice" || resp.Msg.Devices[0].Id != "dev_0123456789abcdef" {
		t.Fatalf("a live device token: %v, %v", resp, err)
	}
	for _, tok := range []string{"", "cbit_" + strings.Repeat("a", 64), "cb_short", "cb_" + strings.Repeat("0", 64)} {
		_, err := c.ListDevices(ctx, bearerHeader(connect.NewRequest(&controlv1.ListDevicesRequest{}), tok))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("bearer %q: %v, want UNAUTHENTICATED", tok, err)
		}
	}
}

// A gRPC stream open on a token ends, UNAUTHENTICATED, when the token is revoked.
func TestStreamOpenOnARevokedTokenEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user(t, "alice")
	dev := f.device(t, alice, "dev_0123456789abcdef")
	other := f.device(t, alice, "dev_00000000000000bb")
	ix := f.index(t)
	c := grpcClient(serve(t, ix))
	// A deadline, so a stream the revoke fails to end fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	revoked, err := c.WatchDevices(ctx, bearerHeader(connect.NewRequest(&controlv1.WatchDevicesRequest{}), string(dev)))
	if err != nil {
		t.Fatal(err)
	}
	defer revoked.Close()
	kept, err := c.WatchDevices(ctx, bearerHeader(connect.NewRequest(&controlv1.WatchDevicesRequest{}), string(other)))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	if !revoked.Receive() || !kept.Receive() {
		t.Fatalf("first messages: %v, %v", revoked.Err(), kept.Err())
	}
	f.revokeDevice(t, alice, "dev_0123456789abcdef")
	if revoked.Receive() {
		t.Fatal("the stream on the revoked token sent another message")
	}
	if connect.CodeOf(revoked.Err()) != connect.CodeUnauthenticated || !strings.Contains(revoked.Err().Error(), "revoked") {
		t.Fatalf("the revoked stream ended with %v, want UNAUTHENTICATED naming the revoke", revoked.Err())
	}
	// The stream on the other token is still open: its context is not done.
	if p, err := ix.Check(string(other)); err != nil || p.ctx.Err() != nil {
		t.Fatalf("the other device: %v", err)
	}
}

func TestRequireAnswers401WithReasonAndChallenge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user(t, "alice")
	dev := f.device(t, alice, "dev_0123456789abcdef")
	base := serve(t, f.index(t))
	get := func(auth string) (int, string, string) {
		req, _ := http.NewRequest("GET", base+"/me", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("WWW-Authenticate")
	}
	if code, body, _ := get("Bearer " + string(dev)); code != 200 || body != "alice" {
		t.Fatalf("live token: %d %q", code, body)
	}
	if code, body, _ := get("bearer " + string(dev)); code != 200 || body != "alice" {
		t.Fatalf("the scheme is case-insensitive (RFC 7235): %d %q", code, body)
	}
	for auth, want := range map[string]string{
		"":                                       "no bearer token",
		"Basic YTpi":                             "malformed token",
		"Bearer cbit_" + strings.Repeat("a", 64): "invite-scoped",
		"Bearer cba_" + strings.Repeat("a", 64):  "agent's access token",
		"Bearer cb_" + strings.Repeat("0", 64):   "unknown or revoked",
	} {
		code, body, challenge := get(auth)
		if code != 401 || !strings.Contains(body, want) || challenge != `Bearer error="invalid_token"` {
			t.Errorf("%q: %d %q %q; want 401 naming %q", auth, code, body, challenge, want)
		}
	}
}

func TestFromContextWithoutCheck(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("a principal in a bare context")
	}
}
