//go:build booted

package controlmcp

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Boxes.Events ended OK when the token it was opened with was revoked,
// so a watcher could not tell a revoke from a clean end. Now it ends
// UNAUTHENTICATED, as every other call on a revoked token: alice's event
// stream opened with her personal token ends so when another of her
// devices revokes that token.
func TestBoxesEventsEndsUnauthenticatedWhenItsTokenIsRevoked(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := harness.SignIn(ctx, h.api.URL, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := c.Post(ctx, "/cb/api/me/token", map[string]string{})
	var made struct{ Token string }
	if err != nil || status != http.StatusOK || json.Unmarshal([]byte(body), &made) != nil {
		t.Fatalf("the personal token: %d %s %v", status, body, err)
	}
	if _, err := h.api.CreateBox(ctx, h.alice, "ev", ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.api.DeleteBox(context.Background(), h.alice, "ev") })
	stream, err := harness.Boxes(h.api.URL, made.Token).Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() { // the call is open on the api: its first event came
		t.Fatalf("Events sent no first event: %v", stream.Err())
	}
	if _, err := harness.Account(h.api.URL, h.alice).RevokeToken(ctx, connect.NewRequest(&controlv1.RevokeTokenRequest{})); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	if code := connect.CodeOf(stream.Err()); stream.Err() == nil || code != connect.CodeUnauthenticated {
		t.Fatalf("Events after its token was revoked ended with %v (%v); want unauthenticated", stream.Err(), code)
	}
}
