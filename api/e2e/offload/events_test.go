//go:build booted

package offload

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
)

// sessionClient is a Session client on the test's api with token.
func sessionClient(token string) controlv1connect.SessionClient {
	return controlv1connect.NewSessionClient(wire.H2CClient("", token, 0), api.URL, connect.WithGRPC())
}

// Contract: Offload, "Event." (issue 22, "Not built: Session.Events'
// offload updates"): a Session.Events client of the box's owner gets the
// offload's status changes (entry and seq unset) and its progress entry
// (entry and seq set) as OffloadUpdates relayed from the box agent's
// watch of the real inbox, never the hand-over's body; another user's
// token gets NOT_FOUND for the box, as Exec answers. The stand-in holds
// its first turn until the test saw the session working on the stream,
// so the watch is open before the progress is posted.
func TestSessionEventsRelayTheOffloadsUpdatesWithoutTheBody(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	other, err := api.UserToken(ctx, "eve", password, "eve-laptop")
	if err != nil {
		t.Fatal(err)
	}
	denied, err := sessionClient(other).Events(ctx, connect.NewRequest(&controlv1.SessionEventsRequest{Box: boxName}))
	if err != nil {
		t.Fatal(err)
	}
	for denied.Receive() {
		t.Errorf("another user's Events on the box sent %v", denied.Msg())
	}
	if code := connect.CodeOf(denied.Err()); code != connect.CodeNotFound {
		t.Errorf("another user's Events on the box ended %v (%v); want not_found", denied.Err(), code)
	}

	data := t.TempDir()
	top := newRepo(t, "evented", [2]string{"a.txt", "one\n"})
	handOver(t, top, data, "a turn with progress", "standin: hold", "standin: progress")
	res := mustCLI(t, top, data, "offload", "--box", boxName, "--yes", "--json")
	key := res["repo"].(string)
	// The box is the package's: a release file left behind ends the next
	// test's held turn at once, so the cleanup releases only a turn this
	// test failed to release itself.
	released := false
	t.Cleanup(func() {
		if !released {
			inBox(t, "runuser -u user -- touch /home/user/.standin/release")
		}
		cli(t, top, data, "back", "--json")
	})

	stream, err := sessionClient(userToken).Events(ctx, connect.NewRequest(&controlv1.SessionEventsRequest{Box: boxName}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	updates := make(chan *controlv1.OffloadUpdate)
	go func() {
		defer close(updates)
		for stream.Receive() {
			updates <- stream.Msg().GetOffload()
		}
	}()
	// next waits for an update of the offload that want accepts; every
	// update on the way is checked for the body and the seq rule.
	next := func(what string, want func(*controlv1.OffloadUpdate) bool) *controlv1.OffloadUpdate {
		t.Helper()
		for {
			select {
			case u, ok := <-updates:
				if !ok {
					t.Fatalf("Events ended (%v) before %s", stream.Err(), what)
				}
				text := protojson.Format(u)
				if strings.Contains(text, "Hand-over") || strings.Contains(text, "standin progress") {
					t.Errorf("an update carries the body: %s", text)
				}
				if (u.Entry == "") != (u.Seq == nil) {
					t.Errorf("an update's seq is set exactly for an entry: %s", text)
				}
				if u.Repo == key && want(u) {
					if u.Name != "evented" || u.Cli != "claude" || u.OffloadId == "" {
						t.Errorf("the update's session: %s", text)
					}
					return u
				}
			case <-ctx.Done():
				t.Fatalf("no update: %s", what)
			}
		}
	}
	next("the session working (the stand-in holding)", func(u *controlv1.OffloadUpdate) bool { return u.Entry == "" && u.Status == "working" })

	inBox(t, "runuser -u user -- touch /home/user/.standin/release")
	released = true
	p := next("the progress entry", func(u *controlv1.OffloadUpdate) bool { return u.Entry == "progress" })
	if p.GetSeq() < 1 {
		t.Errorf("the progress entry's seq: %d", p.GetSeq())
	}
	next("the session idle after its turn", func(u *controlv1.OffloadUpdate) bool { return u.Entry == "" && u.Status == "idle" })

	// A call made now starts with the session's current status (what
	// "replayed" is here); revoking its token (the personal token, which
	// RevokeToken revokes) ends it UNAUTHENTICATED.
	console, err := harness.SignIn(ctx, api.URL, "offloader", password)
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := console.Post(ctx, "/cb/api/me/token", map[string]string{})
	var personal struct{ Token string }
	if err != nil || status != http.StatusOK || json.Unmarshal([]byte(body), &personal) != nil {
		t.Fatalf("the personal token: %d %s %v", status, body, err)
	}
	second := personal.Token
	again, err := sessionClient(second).Events(ctx, connect.NewRequest(&controlv1.SessionEventsRequest{Box: boxName}))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for {
		if !again.Receive() {
			t.Fatalf("a new call ended (%v) before the session's current status", again.Err())
		}
		if u := again.Msg().GetOffload(); u.Repo == key {
			if u.Status != "idle" || u.Entry != "" || u.Seq != nil {
				t.Errorf("a new call's first update of the session: %s; want its status, idle", protojson.Format(u))
			}
			break
		}
	}
	if _, err := harness.Account(api.URL, second).RevokeToken(ctx, connect.NewRequest(&controlv1.RevokeTokenRequest{})); err != nil {
		t.Fatal(err)
	}
	for again.Receive() {
	}
	if code := connect.CodeOf(again.Err()); again.Err() == nil || code != connect.CodeUnauthenticated {
		t.Errorf("Events after its token was revoked ended with %v (%v); want unauthenticated", again.Err(), code)
	}
}
