package tokens_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The index's interceptor in the api as the product builds it (apitest.New):
// the Account service's calls carry the token the interceptor checked.

// device gives alice a device token with id, as a sign-in does, notifying
// every api's index, and waits until the api's index knows it.
func device(t *testing.T, a *apitest.API, id string) tokens.Secret {
	t.Helper()
	secret, sum := tokens.New()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, a.DB.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO user_tokens (id, user_id, sha256, client, label) VALUES ($1, $2, $3, 'cocoonbox-cli', 'laptop')", id, a.User.ID, sum[:]); err != nil {
			return err
		}
		return users.Notify(ctx, tx, a.User.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "the index knows "+id, func() (bool, string) {
		_, err := a.Index.Check(string(secret))
		return err == nil, fmt.Sprint(err)
	})
	return secret
}

// account is a gRPC client of the api's Account service with the bearer tok
// (none when empty).
func account(a *apitest.API, tok string) controlv1connect.AccountClient {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	var opts []connect.ClientOption
	if tok != "" {
		opts = append(opts, connect.WithInterceptors(client.BearerInterceptor(tok)))
	}
	return controlv1connect.NewAccountClient(&http.Client{Transport: &http.Transport{Protocols: &p}}, a.URL, append(opts, connect.WithGRPC())...)
}

func TestInterceptorRefusesBadBearersUnauthenticated(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	dev := device(t, a, "dev_0123456789abcdef")
	ctx := context.Background()
	resp, err := account(a, string(dev)).ListDevices(ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if err != nil || len(resp.Msg.Devices) != 1 || resp.Msg.Devices[0].Id != "dev_0123456789abcdef" || !resp.Msg.Devices[0].Current {
		t.Fatalf("a live device token: %v, %v", resp, err)
	}
	for tok, want := range map[string]connect.Code{
		"":                              connect.CodeUnauthenticated,
		"cb_short":                      connect.CodeUnauthenticated,
		"cb_" + strings.Repeat("0", 64): connect.CodeUnauthenticated,
		// An invite-scoped token meets signup's guard first, in front of
		// every route (signup.GuardInviteTokens): refused before the
		// interceptor, as the product runs.
		"cbit_" + strings.Repeat("a", 64): connect.CodePermissionDenied,
	} {
		_, err := account(a, tok).ListDevices(ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
		if connect.CodeOf(err) != want {
			t.Errorf("bearer %q: %v, want %v", tok, err, want)
		}
	}
}

// A gRPC stream open on a token ends, UNAUTHENTICATED, when the token is
// revoked; a stream on another token of the same user stays open.
func TestStreamOpenOnARevokedTokenEnds(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	dev := device(t, a, "dev_0123456789abcdef")
	other := device(t, a, "dev_00000000000000bb")
	// A deadline, so a stream the revoke fails to end fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	revoked, err := account(a, string(dev)).WatchDevices(ctx, connect.NewRequest(&controlv1.WatchDevicesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer revoked.Close()
	kept, err := account(a, string(other)).WatchDevices(ctx, connect.NewRequest(&controlv1.WatchDevicesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	if !revoked.Receive() || !kept.Receive() {
		t.Fatalf("first messages: %v, %v", revoked.Err(), kept.Err())
	}
	if _, err := account(a, string(other)).RevokeDevice(ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: "dev_0123456789abcdef"})); err != nil {
		t.Fatalf("revoke the first device from the other: %v", err)
	}
	// The stream on the revoked token ends; the devices the kept stream
	// sends in between are not the test's.
	for revoked.Receive() {
	}
	if connect.CodeOf(revoked.Err()) != connect.CodeUnauthenticated || !strings.Contains(revoked.Err().Error(), "revoked") {
		t.Fatalf("the revoked stream ended with %v, want UNAUTHENTICATED naming the revoke", revoked.Err())
	}
	// The stream on the other token is still open: it sends the list
	// without the revoked device.
	for {
		if !kept.Receive() {
			t.Fatalf("the other device's stream ended: %v", kept.Err())
		}
		if d := kept.Msg().Devices; len(d) == 1 && d[0].Id == "dev_00000000000000bb" {
			break
		}
	}
	if _, err := a.Index.Check(string(other)); err != nil {
		t.Fatalf("the other device: %v", err)
	}
}
