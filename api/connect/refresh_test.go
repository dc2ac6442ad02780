package connect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
)

// answeredByServer is the control MCP's own answer to box_list on an api
// without boxes, which it gives only past its token check.
const answeredByServer = "box_list: this api has no box supervisor"

// Issue 44, Deliver 2 (must show): refresh is single-flight per grant
// across replicas. The grant of another cocoonbox-api's control MCP has
// an hour-long access token; with the clock of two apis on one database
// 58 minutes on (less than 5 minutes left), 20 door calls at once, ten on
// each api, all answer through the server, and its token endpoint got
// one refresh_token grant, whose rotated refresh token was committed:
// a second round 58 minutes later refreshes once more with it.
func TestRefreshIsSingleFlightAcrossTwoApis(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	f := newFlowFixture(t, apitest.WithClock(now))
	f.connect(t, "agents")
	token := string(f.a.PersonalToken(f.a.User.ID))
	key, _ := f.a.Config.MasterKeyFile() // every replica has the same
	replica := apitest.New(t, apitest.WithDatabaseOf(f.a), apitest.WithConnect(f.as.upstream()), apitest.WithClock(now),
		apitest.WithConfig(func(c *config.Config) { c.Secrets.MasterKeyFile = key }))

	for round, want := range []int64{1, 2} {
		skew.Add(int64(58 * time.Minute))
		doors := []*sdk.ClientSession{door(t, f.a, token), door(t, replica, token)}
		var wg sync.WaitGroup
		errs := make(chan string, 20)
		for i := range 20 {
			wg.Go(func() {
				res, err := doors[i%2].CallTool(context.Background(), &sdk.CallToolParams{Name: "agents__box_list", Arguments: map[string]any{}})
				if err != nil {
					errs <- fmt.Sprintf("call %d: %v", i, err)
				} else if !strings.Contains(text(res), answeredByServer) {
					errs <- fmt.Sprintf("call %d: %q", i, text(res))
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("round %d: %s", round, e)
		}
		if got := f.as.refreshes.Load(); got != want {
			t.Fatalf("round %d: the token endpoint got %d refresh_token grants in all, want %d", round, got, want)
		}
	}
}

// Issue 44, Deliver 2 (must show): needs_reconnect. Once the user revokes
// the agent's grant at the authorization server, the next door call gets
// a 401, refreshes once (invalid_grant), and answers a tool error; the
// connector is marked needs_reconnect and leaves the door.
func TestARevokedGrantNeedsReconnect(t *testing.T) {
	f := newFlowFixture(t)
	f.connect(t, "agents")
	token := string(f.a.PersonalToken(f.a.User.ID))
	cs := door(t, f.a, token)
	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "agents__box_list", Arguments: map[string]any{}}); err != nil || !strings.Contains(text(res), answeredByServer) {
		t.Fatalf("agents__box_list before the revoke: %v %q", err, text(res))
	}

	code, body := f.as.send(t, "GET", "/cb/api/agents", nil)
	var agents []struct {
		ID string `json:"id"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &agents) != nil || len(agents) != 1 {
		t.Fatalf("the authorization server's agents: %d %s", code, body)
	}
	if code, body := f.as.send(t, "DELETE", "/cb/api/agents/"+agents[0].ID, nil); code/100 != 2 {
		t.Fatalf("revoke the grant: %d %s", code, body)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "agents__box_list", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "reconnect") {
		t.Fatalf("agents__box_list after the revoke: %v %v %q, want a tool error saying reconnect", err, res, text(res))
	}
	if got := f.as.refreshes.Load(); got != 1 {
		t.Fatalf("the token endpoint got %d refresh_token grants, want 1 (after the 401)", got)
	}
	resp, listed := f.a.Session.Send("GET", "/cb/api/connect", "", "")
	var list struct{ Connectors []connect.Connector }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(listed), &list) != nil || len(list.Connectors) != 1 || !list.Connectors[0].NeedsReconnect {
		t.Fatalf("GET /cb/api/connect after the revoke: %d %s, want agents needs_reconnect", resp.StatusCode, listed)
	}
	if names := toolNames(t, door(t, f.a, token)); len(names) != 0 {
		t.Fatalf("tools on the door of a connector that needs reconnecting: %v", names)
	}
}
