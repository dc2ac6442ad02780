package connect_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
)

// replicaOf is a second api on a's database (a replica: the same master
// key, the same Connect upstream), with alice signed in to its console.
func replicaOf(t *testing.T, a *apitest.API, ev *everything) (*apitest.API, *apitest.Browser) {
	t.Helper()
	key, _ := a.Config.MasterKeyFile()
	b := apitest.New(t, apitest.WithDatabaseOf(a), apitest.WithConnect(ev.Upstream()),
		apitest.WithConfig(func(c *config.Config) { c.Secrets.MasterKeyFile = key }))
	return b, b.SignIn("alice")
}

// callResult is how a door call ended.
type callResult struct {
	res *sdk.CallToolResult
	err error
}

// callEchoOnAsk calls everything__echo (ask) on cs in the background and
// answers where its end arrives, once its approval is pending on a.
func callEchoOnAsk(t *testing.T, a *apitest.API, cs *sdk.ClientSession, message string) (<-chan callResult, string) {
	t.Helper()
	done := make(chan callResult, 1)
	// Ended before the apis' cleanup (which waits for open requests), so
	// a failing test does not wait out ApprovalTimeout.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": message}})
		done <- callResult{res, err}
	}()
	return done, waitApproval(t, a)
}

// ended waits for the call's end, at most 60 s (a bound on a hang, not a
// time the test measures).
func ended(t *testing.T, done <-chan callResult, what string) callResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(60 * time.Second):
		t.Fatalf("the open call on the first api did not end within 60 s of %s", what)
		return callResult{}
	}
}

// Issue 44, Deliver 3 (the pending approvals across replicas): a call of
// an ask tool waiting on one api is listed by the console of another api
// on the same database, and answered there: once lets it through on the
// first api, deny refuses it there; an answered approval is gone from both.
func TestAnApprovalIsAnsweredOnAnotherReplica(t *testing.T) {
	ev, a, _, cs := withEchoOnAsk(t)
	_, alice := replicaOf(t, a, ev)
	for _, tc := range []struct {
		decision string
		through  bool
	}{{"once", true}, {"deny", false}} {
		done, id := callEchoOnAsk(t, a, cs, tc.decision)
		resp, body := alice.Send("GET", "/cb/api/connect", "", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":"`+id+`"`) {
			t.Fatalf("%s: GET /cb/api/connect on the replica: %d %s, want the approval %s pending", tc.decision, resp.StatusCode, body, id)
		}
		if resp, body := alice.Send("POST", "/cb/api/connect/approvals/"+id+"/answer", "application/json", `{"decision":"`+tc.decision+`"}`); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: answer on the replica: %d %s, want 204", tc.decision, resp.StatusCode, body)
		}
		r := ended(t, done, "the answer on the replica")
		if tc.through && (r.err != nil || r.res.IsError || !strings.Contains(text(r.res), tc.decision)) {
			t.Fatalf("%s: %v %v %q, want the echo", tc.decision, r.err, r.res, text(r.res))
		}
		if !tc.through && (r.err != nil || !r.res.IsError || !strings.Contains(text(r.res), "denied")) {
			t.Fatalf("%s: %v %v %q, want a tool error saying it was denied", tc.decision, r.err, r.res, text(r.res))
		}
		if resp, body := alice.Send("POST", "/cb/api/connect/approvals/"+id+"/answer", "application/json", `{"decision":"once"}`); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: a second answer: %d %s, want 404", tc.decision, resp.StatusCode, body)
		}
		for _, api := range []*apitest.Browser{a.Session, alice} {
			if resp, body := api.Send("GET", "/cb/api/connect", "", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"approvals":[]`) {
				t.Fatalf("%s: GET /cb/api/connect after the answer: %d %s, want no approval pending", tc.decision, resp.StatusCode, body)
			}
		}
	}
}

// Issue 44, Deliver 3 (every open door call ends with a disconnect or
// sign out everywhere; Contract: Sign out everywhere, "every call open on
// any of them"): either, in the console of another api, ends the call
// waiting on the first with a tool error saying so.
func TestAnEndOnAnotherReplicaEndsTheOpenDoorCalls(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, ctype, body string
		status                          int
		says                            string
	}{
		{"disconnect", "DELETE", "/cb/api/connect/everything", "", "", http.StatusOK, "disconnected"},
		{"sign out everywhere", "POST", "/cb/api/me/sign-out-everywhere", "application/json", "{}", http.StatusNoContent, "signed out everywhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, a, _, cs := withEchoOnAsk(t)
			_, alice := replicaOf(t, a, ev)
			done, _ := callEchoOnAsk(t, a, cs, "open")
			if resp, body := alice.Send(tc.method, tc.path, tc.ctype, tc.body); resp.StatusCode != tc.status {
				t.Fatalf("%s on the replica: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
			}
			r := ended(t, done, tc.name+" on the replica")
			if r.err != nil || !r.res.IsError || !strings.Contains(text(r.res), tc.says) {
				t.Fatalf("the open call: %v %v %q, want a tool error saying %s", r.err, r.res, text(r.res), tc.says)
			}
		})
	}
}

// Issue 44, Deliver 3: sign out everywhere's notification alone ends the
// user's open door calls on an api that did not serve it (what the test
// above cannot tell apart from the token revoke, which races it): the
// notification committed by the test itself, on no api, with the token
// left working, ends the call on the api with ErrSignedOut.
func TestSignOutEverywheresNotificationEndsTheOpenDoorCalls(t *testing.T) {
	_, a, _, cs := withEchoOnAsk(t)
	done, _ := callEchoOnAsk(t, a, cs, "open")
	ctx := context.Background()
	tx, err := a.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := connect.EndUser(ctx, tx, a.User.ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := ended(t, done, "the notification")
	if r.err != nil || !r.res.IsError || text(r.res) != connect.ErrSignedOut.Error() {
		t.Fatalf("the open call: %v %v %q, want the tool error %q", r.err, r.res, text(r.res), connect.ErrSignedOut)
	}
}
