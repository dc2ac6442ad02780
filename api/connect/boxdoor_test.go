package connect_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
)

// withBoxDoor is an api with Connect reaching server-everything, boxes on
// an in-memory supervisor, and the box door on loopback (connect.box_listen
// 127.0.0.1:0: the bridge's address is the booted tests'); its door URL.
func withBoxDoor(t *testing.T) (*everything, *apitest.API, *sandboxtest.Supervisor, string) {
	ev := startEverything(t)
	sup := sandboxtest.New("cbdesk:v23-desk")
	a := apitest.New(t, apitest.WithConnect(ev.Upstream()), apitest.WithSupervisor("local", sup),
		apitest.WithConfig(func(c *config.Config) { c.Connect.BoxListen = "127.0.0.1:0" }))
	if a.BoxDoorAddr == nil {
		t.Fatal("the api has no box door with connect.box_listen set")
	}
	return ev, a, sup, "http://" + a.BoxDoorAddr.String() + connect.BoxDoorPath
}

// runOp waits for op of user and fails t unless it ended well.
func runOp(t *testing.T, svc *boxes.Service, user string, op *boxes.Operation, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	got, err := svc.WaitOperation(context.Background(), user, op.ID, nil)
	if err != nil || got.GetError() != "" {
		t.Fatalf("operation %s: %v %q", op.Kind, err, got.GetError())
	}
}

// makeBox creates user's box name (an agent's box under a grant when
// agent) and answers its id once it runs.
func makeBox(t *testing.T, a *apitest.API, user, name string, agent bool) string {
	t.Helper()
	svc, err := a.Boxes.Service()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if agent {
		ctx = boxes.WithAgent(ctx, &boxes.Agent{GrantID: "grant-1"})
	}
	b, op, err := svc.Create(ctx, boxes.Call{UserID: user, RequestID: "create-" + name}, boxes.CreateRequest{Name: name})
	runOp(t, svc, user, op, err)
	return b.ID
}

// boxKey is the door key box holds now (its CONNECT_KEY claim env entry,
// guest-visible), "" for none.
func boxKey(sup *sandboxtest.Supervisor, box string) string {
	for _, e := range sup.Claims(box) {
		if e.Name == boxes.DoorKeyEntry {
			if !e.Guest {
				return "host-only!"
			}
			return e.Value
		}
	}
	return ""
}

// initialize POSTs an MCP initialize to the door with key as the bearer
// ("" sends none) and answers the status and body.
func initialize(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// boxSession opens an MCP session on the box door with key, with the
// official Go SDK's client.
func boxSession(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	cl := sdk.NewClient(&sdk.Implementation{Name: "box-agent", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{key}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP client on the box door: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Issue 44, Deliver 3 (Contract: Connect, "Box door (mode A ... the same
// handler with door = box)"; Audit: caller box:…): a box's client, with
// the door key its claim env holds, lists and calls its owner's connected
// tools on the box door, and the call's audit row says door box and
// caller box:<box id>, without the arguments.
func TestTheBoxDoorServesTheOwnersToolsWithTheBoxsKey(t *testing.T) {
	ev, a, sup, url := withBoxDoor(t)
	token := string(a.PersonalToken(a.User.ID))
	connectEverything(t, connectors(a, token), ev)
	box := makeBox(t, a, a.User.ID, "main", false)
	key := boxKey(sup, box)
	if !strings.HasPrefix(key, "cbd_"+box+"_") {
		t.Fatalf("the box's %s is %q, want cbd_%s_ and its MAC", boxes.DoorKeyEntry, key, box)
	}

	cs := boxSession(t, url, key)
	if names := toolNames(t, cs); !slices.Contains(names, "everything__echo") {
		t.Fatalf("tools on the box door: %v, want everything__echo", names)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "from the box"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "from the box") {
		t.Fatalf("everything__echo on the box door: %v %v %q", err, res, text(res))
	}
	row := waitAuditRow(t, a)
	if row.Door != connect.DoorBox || row.Caller != "box:"+box || row.UserID != a.User.ID || row.Tool != "echo" || row.Outcome != "ok" {
		t.Fatalf("the box door call's audit row: %+v, want door box, caller box:%s, alice's, echo, ok", row, box)
	}
	noSecretIn(t, fmt.Sprint(auditRows(t, a)), "from the box", key, ev.Key)
}

// Issue 44, Deliver 3: the box door holds against root in the box, who
// holds its key and can send anything: another user's box key opens only
// that user's grants; the key of the previous incarnation (before a
// hibernate and wake) is refused, 401 with no body, and the new one opens;
// a key altered in one digit, a key naming another box, none, a deleted
// box's key are refused; an agent box gets no key (Contract: OAuth for
// agents, "no box door key").
func TestTheBoxDoorRefusesStaleForgedAndAgentKeys(t *testing.T) {
	ev, a, sup, url := withBoxDoor(t)
	token := string(a.PersonalToken(a.User.ID))
	connectEverything(t, connectors(a, token), ev)
	alice := a.User.ID
	box := makeBox(t, a, alice, "main", false)
	bob := a.AddUser("bob", false)
	bobBox := makeBox(t, a, bob.ID, "bobs", false)
	agentBox := makeBox(t, a, alice, "agents", true)

	bobKey := boxKey(sup, bobBox)
	if bobKey == "" || bobKey == boxKey(sup, box) {
		t.Fatalf("bob's box key %q (alice's %q)", bobKey, boxKey(sup, box))
	}
	if names := toolNames(t, boxSession(t, url, bobKey)); len(names) != 0 {
		t.Fatalf("bob's box key shows tools %v; bob has connected none (alice's are hers)", names)
	}
	if k := boxKey(sup, agentBox); k != "" {
		t.Fatalf("the agent box got a door key %q", k)
	}

	svc, _ := a.Boxes.Service()
	stale := boxKey(sup, box)
	if st, _ := initialize(t, url, stale); st != http.StatusOK {
		t.Fatalf("the box's key before the hibernate: %d", st)
	}
	b, op, err := svc.Hibernate(context.Background(), boxes.Call{UserID: alice, RequestID: "hibernate", Box: box})
	runOp(t, svc, alice, op, err)
	_, op, err = svc.Ensure(context.Background(), boxes.Call{UserID: alice, RequestID: "wake", Box: b.ID})
	runOp(t, svc, alice, op, err)
	fresh := boxKey(sup, box)
	if fresh == stale || fresh == "" {
		t.Fatalf("the key after a wake is %q, the one before %q: it must change at every incarnation", fresh, stale)
	}
	if st, _ := initialize(t, url, fresh); st != http.StatusOK {
		t.Fatalf("the woken box's new key: %d", st)
	}

	other := strings.Replace(fresh, box, bobBox, 1)
	last := fresh[len(fresh)-1:]
	flip := map[string]string{"0": "1"}[last]
	if flip == "" {
		flip = "0"
	}
	for name, key := range map[string]string{
		"the previous incarnation's key":  stale,
		"a key altered in its last digit": fresh[:len(fresh)-1] + flip,
		"alice's MAC under bob's box id":  other,
		"a key naming the agent box":      strings.Replace(fresh, box, agentBox, 1),
		"a personal token":                token,
		"none":                            "",
	} {
		if st, body := initialize(t, url, key); st != http.StatusUnauthorized || body != "" {
			t.Errorf("%s: %d %q, want 401 with no body", name, st, body)
		}
	}

	_, op, err = svc.Delete(context.Background(), boxes.Call{UserID: bob.ID, RequestID: "delete", Box: bobBox})
	runOp(t, svc, bob.ID, op, err)
	if st, body := initialize(t, url, bobKey); st != http.StatusUnauthorized || body != "" {
		t.Errorf("a deleted box's key: %d %q, want 401 with no body", st, body)
	}
}
