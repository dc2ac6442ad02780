package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// watch opens Account.WatchDevices on endpoint with token, waits for its
// first list, and answers a channel that gets the stream's end (its error).
func (e *env) watch(endpoint, token string) (ended <-chan error, updates <-chan int) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	stream, err := harness.Account(endpoint, token).WatchDevices(ctx, connect.NewRequest(&controlv1.WatchDevicesRequest{}))
	if err != nil {
		e.t.Fatal(err)
	}
	if !stream.Receive() {
		e.t.Fatalf("WatchDevices on %s sent no first list: %v", endpoint, stream.Err())
	}
	end, upd := make(chan error, 1), make(chan int, 16)
	go func() {
		for stream.Receive() {
			upd <- len(stream.Msg().Devices)
		}
		end <- stream.Err()
	}()
	return end, upd
}

// refused reports whether endpoint refuses token (UNAUTHENTICATED).
func (e *env) refused(endpoint, token string) (bool, string) {
	_, err := harness.Account(endpoint, token).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	return connect.CodeOf(err) == connect.CodeUnauthenticated, fmt.Sprintf("ListDevices answered %v", err)
}

// accepted waits until endpoint takes token: a token made on one api
// reaches the others with the NOTIFY.
func (e *env) accepted(endpoint, token string) {
	e.t.Helper()
	e.waitFor("the api to take a new token", func() (bool, string) {
		_, err := harness.Account(endpoint, token).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
		return err == nil, fmt.Sprintf("ListDevices answered %v", err)
	})
}

// deviceID is the id of token's device, once endpoint takes it.
func (e *env) deviceID(endpoint, token string) string {
	e.t.Helper()
	e.accepted(endpoint, token)
	resp, err := harness.Account(endpoint, token).ListDevices(e.ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range resp.Msg.Devices {
		if d.Current {
			return d.Id
		}
	}
	e.t.Fatal("no current device")
	return ""
}

// Must show: two cocoonbox-api processes on one PostgreSQL: a device revoked
// on one is refused on the other, and a gRPC stream open on the other on
// that token ends. (How long it takes is BenchmarkRevocationPropagation's.)
func TestDeviceRevokedOnOneReplicaIsRefusedOnTheOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.api, e.start()
	c := e.console("alice")
	keeper, victim := e.device(c, "keeper"), e.device(c, "victim")
	victimID := e.deviceID(b.URL, victim)
	e.accepted(b.URL, keeper)
	ended, _ := e.watch(b.URL, victim)
	keeperEnded, _ := e.watch(b.URL, keeper)

	if _, err := harness.Account(a.URL, keeper).RevokeDevice(e.ctx, connect.NewRequest(&controlv1.RevokeDeviceRequest{DeviceId: victimID})); err != nil {
		t.Fatal(err)
	}
	took := e.waitFor("the other api to refuse the revoked device", func() (bool, string) { return e.refused(b.URL, victim) })
	t.Logf("refused on the other api %v after the revoke returned", took)
	select {
	case err := <-ended:
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("the stream on the other api ended with %v, want UNAUTHENTICATED", err)
		}
	case <-e.ctx.Done():
		t.Fatal("the stream on the revoked token did not end on the other api")
	}
	// The control: the other device's stream and token live on.
	select {
	case err := <-keeperEnded:
		t.Fatalf("the stream of a device not revoked ended: %v", err)
	default:
	}
	if ok, saw := e.refused(b.URL, keeper); ok {
		t.Fatalf("the device not revoked is refused: %s", saw)
	}
}

// The sign-in's limits were each api's own, so a guesser spreading wrong
// passwords over n replicas got n times per_user. Two cocoonbox-api
// processes on one PostgreSQL now count one user name's failures together:
// its default 10 taken across both, the next is refused on either.
func TestSignInFailuresAreCountedAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	apis := []*harness.API{e.api, e.start()}
	guess := func(a *harness.API) (int, string) {
		c := &harness.Console{Endpoint: a.URL, Client: http.DefaultClient}
		status, body, err := c.Post(e.ctx, "/cb/api/session", map[string]string{"user": "alice", "password": "wrong horse"})
		if err != nil {
			t.Fatal(err)
		}
		return status, body
	}
	for i := range 10 {
		if status, body := guess(apis[i%2]); status != http.StatusUnauthorized {
			t.Fatalf("wrong password %d on api %d: %d %s, want 401", i+1, i%2, status, body)
		}
	}
	for i, a := range apis {
		if status, body := guess(a); status != http.StatusTooManyRequests || !strings.Contains(body, "too_many") {
			t.Fatalf("the 11th wrong password on api %d: %d %s, want 429 too_many (the other api's failures counted)", i, status, body)
		}
	}
}
