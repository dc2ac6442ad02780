//go:build booted

package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/usage"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// inBox is the start of every model call in a box: the image's agent.env
// and the egress proxy's settings, as an agent's shell has them, and
// GW_BASE_URL on this package's gateway (the image's names the default
// network's 10.203.0.1; the door, the proxy and the key are the same).
const inBox = `set -a; . /etc/cocoonbox/agent.env; set +a; . /etc/profile.d/cocoonbox-egress.sh
echo "GW_API_KEY=$GW_API_KEY"
GW_BASE_URL=http://` + gateway + `:18090/v1
`

// chats is a shell loop of n chat completions of model through the proxy,
// printing how many answered each HTTP status ("    200 200").
func chats(n int, model string) string {
	return inBox + fmt.Sprintf(`i=0; while [ $i -lt %d ]; do
curl -sS --max-time 60 -o /dev/null -w '%%{http_code}\n' "$GW_BASE_URL/chat/completions" -H "Authorization: Bearer $GW_API_KEY" \
 -H 'Content-Type: application/json' -d '{"model": "%s", "messages": [{"role": "user", "content": "three words here"}]}'
i=$((i+1)); done | sort | uniq -c`, n, model)
}

// oneChat is one chat completion printing its body, then its status.
func oneChat(model string) string {
	return inBox + fmt.Sprintf(`curl -sS --max-time 60 -w '\n%%{http_code}\n' "$GW_BASE_URL/chat/completions" -H "Authorization: Bearer $GW_API_KEY" \
 -H 'Content-Type: application/json' -d '{"model": "%s", "messages": [{"role": "user", "content": "three words here"}]}'`, model)
}

type testBox struct {
	user, name, id string
	agent          bool
}

// Issue 46, Must show, in booted boxes made through the api (Contract:
// Model usage, Box API keys, OAuth for agents):
//   - in a box, curl $GW_BASE_URL/models with Bearer $GW_API_KEY reaches
//     the stand-in with the user's real key (minted by the api at the
//     user's first box) while the box holds unprovisioned; the key is in
//     no process's environment and no file of the box;
//   - the stand-in's metering and the api's figures (Boxes.Usage per
//     model, the usage tool) agree over 1,000 chat completions from 5
//     boxes of 2 users, one of them an agent's box of alice, metered to
//     alice's key: gw saw each call with its box owner's key;
//   - with alice's daily cap lowered by an admin below what she spent, a
//     call from her agent's box is refused by gw with budget_exceeded,
//     and usage (Boxes.Usage and the agent's usage tool) shows
//     remaining_today_micros 0; bob's box, on his own cap, still calls.
func TestModelCallsFromBoxesAreMeteredToTheOwnersKeyAndCap(t *testing.T) {
	a := apitest.New(t, apitest.WithGW(gwUp), apitest.WithSupervisor("local", sup))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bob := a.AddUser("bob", false)
	alice := a.User.ID
	if _, err := a.Server.DB.Pool.Exec(ctx, "UPDATE users SET max_boxes = 3, max_running = 3"); err != nil {
		t.Fatal(err)
	}
	token := map[string]string{alice: string(a.PersonalToken(alice)), bob.ID: string(a.PersonalToken(bob.ID))}
	con, err := harness.SignIn(ctx, a.URL, "alice", apitest.Password)
	if err != nil {
		t.Fatal(err)
	}
	agentToken, err := con.Agent(ctx, "agent of alice", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	agent := mcptest.Connect(t, a.URL+"/cocoonbox.mcp/control", agentToken)

	// Five boxes, begun at once: alice's two and her agent's, bob's two.
	boxes := []*testBox{{user: alice, name: "main"}, {user: alice, name: "second"}, {user: alice, name: "agent", agent: true},
		{user: bob.ID, name: "main"}, {user: bob.ID, name: "second"}}
	for _, b := range boxes {
		if b.agent {
			b.id, _ = agent.OK(t, "box_create", map[string]any{"name": b.name, "wait": false})["box_id"].(string)
			continue
		}
		r, err := harness.Boxes(a.URL, token[b.user]).Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "create-" + b.name, Name: b.name}))
		if err != nil {
			t.Fatalf("create %s's %s: %v", b.user, b.name, err)
		}
		b.id = r.Msg.GetBox().GetBoxId()
	}
	for _, b := range boxes {
		waitRunning(t, harness.Boxes(a.URL, token[b.user]), b.name)
	}
	keys := map[string]string{}
	for _, u := range []string{alice, bob.ID} {
		e, err := a.Server.Usage.Entry(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		keys[u] = e.Value
	}

	// $GW_BASE_URL/models as the Must show has it, in a box of each user.
	for _, b := range []*testBox{boxes[0], boxes[3]} {
		before := len(gwUp.Calls())
		out, err := harness.InBox(bridge, b.id, nil, inBox+`curl -sS --max-time 60 "$GW_BASE_URL/models" -H "Authorization: Bearer $GW_API_KEY"`)
		if err != nil || !strings.Contains(out, "GW_API_KEY=unprovisioned") || !strings.Contains(out, gwtest.Models[0].ID) {
			t.Fatalf("curl models in %s: %v\n%s", b.name, err, out)
		}
		if calls := gwUp.Calls()[before:]; len(calls) != 1 || calls[0].Key != keys[b.user] || calls[0].Path != "/v1/models" {
			t.Fatalf("gw saw %+v for the models call from %s's %s, want one /v1/models with the owner's key", calls, b.user, b.name)
		}
	}

	// 1,000 chat completions, 200 from each box at once.
	const each = 200
	before := len(gwUp.Calls())
	var wg sync.WaitGroup
	for i, b := range boxes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := harness.InBox(bridge, b.id, nil, chats(each, gwtest.Models[i%2].ID))
			if err != nil || strings.Join(strings.Fields(out), " ") != fmt.Sprintf("GW_API_KEY=unprovisioned %d 200", each) {
				t.Errorf("%d calls from %s's %s: %v\n%s", each, b.user, b.name, err, out)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	byKey := map[string]int{}
	for _, c := range gwUp.Calls()[before:] {
		byKey[c.Key]++
	}
	if byKey[keys[alice]] != 3*each || byKey[keys[bob.ID]] != 2*each || len(byKey) != 2 {
		t.Fatalf("gw saw %d calls with alice's key, %d with bob's, %d keys in all; want %d, %d and 2", byKey[keys[alice]], byKey[keys[bob.ID]], len(byKey), 3*each, 2*each)
	}
	for u, calls := range map[string]int64{alice: 3 * each, bob.ID: 2 * each} {
		m := usageOf(t, a, token[u])
		spent := gwUp.SpendMicros(u, today())
		var perModel, requests int64
		for _, mu := range m.Models {
			perModel += mu.Micros
			requests += mu.Requests
		}
		if spent == 0 || m.TodayMicros != spent || m.MonthMicros != spent || perModel != spent || requests != calls || // the /models call is not metered
			m.DailyCapMicros != usage.DefaultDailyCapMicros || m.RemainingTodayMicros != m.DailyCapMicros-spent {
			b, _ := json.Marshal(m)
			t.Fatalf("Usage of %s: %s; gw metered %d micro-dollars, %d calls", u, b, spent, calls)
		}
	}

	// The key is not in the boxes: alice's agent box and bob's first.
	for _, b := range []*testBox{boxes[2], boxes[3]} {
		half := len(keys[b.user]) / 2
		grep := fmt.Sprintf(`k=%q%q
for f in /proc/[0-9]*/environ; do grep -lF "$k" "$f"; done 2>/dev/null
grep -rlF "$k" /etc /run /var /home /root /tmp 2>/dev/null; echo done`, keys[b.user][:half], keys[b.user][half:])
		if out, _ := harness.InBox(bridge, b.id, nil, grep); strings.TrimSpace(out) != "done" {
			t.Fatalf("%s's box %s holds the owner's gw key:\n%s", b.user, b.name, out)
		}
	}

	// An admin lowers alice's cap below her spend: her agent's next call
	// is refused by gw, and usage says nothing remains today.
	a.AddUser("boss", true)
	if resp, body := a.SignIn("boss").Send("PATCH", "/cb/api/users/"+alice, "application/json", `{"daily_cap_micros": 1}`); resp.StatusCode != 200 {
		t.Fatalf("PATCH alice's cap: %d %s", resp.StatusCode, body)
	}
	spent := gwUp.SpendMicros(alice, today())
	out, _ := harness.InBox(bridge, boxes[2].id, nil, oneChat(gwtest.Models[0].ID))
	if !strings.HasSuffix(strings.TrimSpace(out), "\n400") || !strings.Contains(out, `"budget_exceeded"`) || !strings.Contains(out, "Budget has been exceeded") {
		t.Fatalf("a call from alice's agent box over her cap answered:\n%s\nwant 400 budget_exceeded with gw's message", out)
	}
	t.Logf("the refusal in the box:\n%s", out)
	if m := usageOf(t, a, token[alice]); m.RemainingTodayMicros != 0 || m.DailyCapMicros != 1 || m.DefaultCap || m.TodayMicros != spent || gwUp.SpendMicros(alice, today()) != spent {
		b, _ := json.Marshal(m)
		t.Fatalf("alice's Usage over her cap: %s; gw metered %d, before the refused call %d", b, gwUp.SpendMicros(alice, today()), spent)
	}
	if u := agent.OK(t, "usage", nil); u["remaining_today_micros"] != float64(0) || u["today"] != float64(spent) || u["daily_cap_micros"] != float64(1) {
		t.Fatalf("the agent's usage tool over alice's cap: %v, want remaining_today_micros 0 and today %d", u, spent)
	}
	if out, _ := harness.InBox(bridge, boxes[3].id, nil, oneChat(gwtest.Models[0].ID)); !strings.HasSuffix(strings.TrimSpace(out), "\n200") {
		t.Fatalf("bob's call on his own cap:\n%s\nwant 200", out)
	}
}

// usageOf is Boxes.Usage per model with token.
func usageOf(t *testing.T, a *apitest.API, token string) *controlv1.UsageResponse {
	t.Helper()
	r, err := harness.Boxes(a.URL, token).Usage(context.Background(), connect.NewRequest(&controlv1.UsageRequest{PerModel: true}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg
}

// waitRunning waits until the box name is running with no operation.
func waitRunning(t *testing.T, c controlv1connect.BoxesClient, name string) {
	t.Helper()
	wait.Eventually(t, 5*time.Minute, "box "+name+" running", func() (bool, string) {
		r, err := c.Status(context.Background(), connect.NewRequest(&controlv1.BoxStatusRequest{Box: name}))
		if err != nil {
			return false, err.Error()
		}
		return r.Msg.GetBox().GetState() == controlv1.BoxState_BOX_STATE_RUNNING && r.Msg.GetOperation() == nil, r.Msg.String()
	})
}

func today() string { return time.Now().UTC().Format(time.DateOnly) }
