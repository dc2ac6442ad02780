package devices

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

type callerKey struct{}

// account serves the Account service with the caller taken from the bearer
// by a lookup in user_tokens (the api's own check is package tokens', tested
// there and end to end); it answers a client calling with secret.
func (f *fixture) account(secret string) controlv1connect.AccountClient {
	f.t.Helper()
	caller := func(ctx context.Context) (Caller, bool) { c, ok := ctx.Value(callerKey{}).(Caller); return c, ok }
	path, h := controlv1connect.NewAccountHandler(NewAccount(f.store, caller, slog.New(slog.DiscardHandler)))
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := sha256.Sum256([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
		var c Caller
		if f.db.Pool.QueryRow(r.Context(), `SELECT user_id, id FROM user_tokens WHERE sha256 = $1`, sum[:]).Scan(&c.UserID, &c.DeviceID) == nil {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		}
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	f.t.Cleanup(srv.Close)
	bearer := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+secret)
			return next(ctx, req)
		}
	})
	return controlv1connect.NewAccountClient(srv.Client(), srv.URL, connect.WithInterceptors(bearer))
}

// Contract: ListDevices answers the console's list plus current, true for
// the device whose token made the call.
func TestListDevicesMarksTheCallersDeviceCurrent(t *testing.T) {
	f := newFixture(t)
	alice := f.user("alice")
	mine, secret := f.device(alice, "laptop")
	f.device(alice, "desk")
	resp, err := f.account(secret).ListDevices(f.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	current := 0
	for _, d := range resp.Msg.Devices {
		if d.Current {
			current++
			if d.Id != mine || d.Label != "laptop" {
				t.Fatalf("current is %v, want %s", d, mine)
			}
		}
	}
	if len(resp.Msg.Devices) != 2 || current != 1 {
		t.Fatalf("devices %v", resp.Msg.Devices)
	}
}

// Contract: RevokeDevice is NOT_FOUND for another user's device or one already gone.
func TestRevokeDeviceNotFoundForAnotherUsersDevice(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	_, aliceSecret := f.device(alice, "laptop")
	bobs, _ := f.device(bob, "bob's")
	acct := f.account(aliceSecret)
	_, err := acct.RevokeDevice(f.ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: bobs}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("revoking another user's device: %v, want NOT_FOUND", err)
	}
	_, err = acct.RevokeDevice(f.ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: "dev_0000000000000000"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("revoking a device that is gone: %v, want NOT_FOUND", err)
	}
}

func TestAccountWithoutACallerIsUnauthenticated(t *testing.T) {
	f := newFixture(t)
	_, err := f.account("cb_nothing").ListDevices(f.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("%v, want UNAUTHENTICATED", err)
	}
}
