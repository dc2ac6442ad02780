package cli

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// Contract: a device token ends when the client sends it to POST
// /cocoonbox.oauth/revoke; 200 for an unknown token, and a personal token
// is left alone.
func TestOAuthRevokeEndsADeviceTokenOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console("alice")
	personal, device := e.personalToken(c), e.device(c, "laptop")
	revoke := func(token string) int {
		t.Helper()
		resp, err := http.Post(e.api.URL+"/cocoonbox.oauth/revoke", "application/x-www-form-urlencoded",
			strings.NewReader(url.Values{"token": {token}, "client_id": {"cocoonbox-cli"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, tok := range map[string]string{"an unknown token": "cb_" + strings.Repeat("0", 64), "a malformed one": "hello", "the personal token": personal} {
		if status := revoke(tok); status != http.StatusOK {
			t.Errorf("revoke of %s: %d, want 200", name, status)
		}
	}
	if ok, saw := e.refused(e.api.URL, personal); ok {
		t.Fatalf("the personal token was revoked by /cocoonbox.oauth/revoke: %s", saw)
	}
	if status := revoke(device); status != http.StatusOK {
		t.Fatalf("revoke of the device token: %d", status)
	}
	if ok, saw := e.refused(e.api.URL, device); !ok {
		t.Fatalf("the device token works after its revoke: %s", saw)
	}
}

// Contract: Account.RevokeToken revokes the personal token; device tokens stay.
func TestAccountRevokeTokenEndsThePersonalTokenOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.console("alice")
	personal, device := e.personalToken(c), e.device(c, "laptop")
	ended, _ := e.watch(e.api.URL, personal)
	if _, err := harness.Account(e.api.URL, device).RevokeToken(e.ctx, connect.NewRequest(&controlv1.RevokeTokenRequest{})); err != nil {
		t.Fatal(err)
	}
	if ok, saw := e.refused(e.api.URL, personal); !ok {
		t.Fatalf("the personal token works after RevokeToken: %s", saw)
	}
	select {
	case err := <-ended:
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("the personal token's stream ended with %v", err)
		}
	case <-e.ctx.Done():
		t.Fatal("the personal token's stream did not end")
	}
	if ok, saw := e.refused(e.api.URL, device); ok {
		t.Fatalf("the device token was revoked with the personal one: %s", saw)
	}
	// Done also when there is none.
	if _, err := harness.Account(e.api.URL, device).RevokeToken(e.ctx, connect.NewRequest(&controlv1.RevokeTokenRequest{})); err != nil {
		t.Fatalf("RevokeToken without a personal token: %v", err)
	}
}
