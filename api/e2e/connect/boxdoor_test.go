//go:build booted

package connect

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// post is the end of curl's command line of an MCP initialize POSTed to
// the box door on this package's gateway with the key in $KEY, printing
// the body and then the status.
const post = ` --max-time 30 -w '\n%{http_code}\n' -X POST http://` + gateway + `:18091/mcp \
 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
 -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'`

// initialize is a shell line run as root in a box: the initialize
// straight to the gateway's 18091 (--noproxy), which the firewall lets
// boxes reach.
const initialize = `curl -sS --noproxy '*'` + post

// throughProxy is the initialize sent the way the box's programs send it:
// through the egress proxy (HTTP_PROXY from the image's profile), which
// answers the door's address with the api's handler (local.Config.Doors).
const throughProxy = `. /etc/profile.d/cocoonbox-egress.sh; curl -sS` + post

// withKey is a line that sets KEY to the box's own door key, read from its
// claim env as root does (/run/silkd.env, root 0600), before line.
func withKey(line string) string {
	return `set -a; . /run/silkd.env; set +a; KEY="$CONNECT_KEY"; [ -n "$KEY" ] || { echo "no CONNECT_KEY in /run/silkd.env" >&2; exit 1; }; ` + line
}

// status splits curl's output (initialize) into the body and the status.
func status(t *testing.T, out string) (string, string) {
	t.Helper()
	out = strings.TrimRight(out, "\n")
	i := strings.LastIndexByte(out, '\n')
	if i < 0 {
		return "", out
	}
	return out[:i], out[i+1:]
}

// Issue 44, Deliver 3 (must show, booted; Contract: Connect, "Box door ...
// authenticated by the machine's door key ... a request without a current
// key gets 401 with no body"): root in a booted box made through the api
// reads its door key from /run/silkd.env and an MCP initialize with it on
// the box door (curl, straight to the gateway and through the egress
// proxy) answers the door's server; the key with one digit
// changed is 401 with no body; after the box hibernates and wakes, the
// key it held before is 401 with no body and the one it holds now opens.
func TestABoxReachesTheBoxDoorWithItsKeyAndAStaleOrForgedKeyIsRefused(t *testing.T) {
	a := apitest.New(t, apitest.WithConnect(connect.UpstreamConfig{}), apitest.WithConfiguredSupervisor(),
		apitest.WithConfig(func(c *config.Config) {
			c.Sandbox.Local.Images, c.Sandbox.Local.StateDir = images, filepath.Join(testRoot, "state")
			c.Sandbox.Local.Bridge, c.Sandbox.Local.Gateway, c.Sandbox.Local.Spares = bridge, gateway+"/16", 0
			c.Connect.BoxListen = gateway + ":18091"
		}))
	if a.BoxDoorAddr == nil {
		t.Fatalf("the api has no box door on %s:18091", gateway)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	svc, err := a.Boxes.Service()
	if err != nil {
		t.Fatal(err)
	}
	alice := a.User.ID
	run := func(what string, op *boxes.Operation, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got, err := svc.WaitOperation(ctx, alice, op.ID, nil); err != nil || got.GetError() != "" {
			t.Fatalf("%s: %v %q", what, err, got.GetError())
		}
	}
	b, op, err := svc.Create(ctx, boxes.Call{UserID: alice, RequestID: "create"}, boxes.CreateRequest{Name: "main"})
	run("create", op, err)

	out, err := harness.InBox(bridge, b.ID, nil, withKey(initialize))
	if body, st := status(t, out); err != nil || st != "200" || !strings.Contains(body, "cocoonbox-connect") {
		t.Fatalf("initialize with the box's key: %v, status %s, body %q", err, st, body)
	}
	out, err = harness.InBox(bridge, b.ID, nil, withKey(throughProxy))
	if body, st := status(t, out); err != nil || st != "200" || !strings.Contains(body, "cocoonbox-connect") {
		t.Fatalf("initialize with the box's key through the egress proxy: %v, status %s, body %q", err, st, body)
	}
	stale, err := harness.InBox(bridge, b.ID, nil, withKey(`printf %s "$KEY"`))
	if err != nil || !strings.HasPrefix(stale, "cbd_"+b.ID+"_") {
		t.Fatalf("the box's key: %v %q", err, stale)
	}
	forged := `KEY="${KEY%?}"; case "${CONNECT_KEY#"$KEY"}" in 0) KEY="${KEY}1";; *) KEY="${KEY}0";; esac; ` + initialize
	out, err = harness.InBox(bridge, b.ID, nil, withKey(forged))
	if body, st := status(t, out); err != nil || st != "401" || body != "" {
		t.Fatalf("initialize with the key's last digit changed: %v, status %s, body %q; want 401 with no body", err, st, body)
	}

	_, op, err = svc.Hibernate(ctx, boxes.Call{UserID: alice, RequestID: "hibernate", Box: b.ID})
	run("hibernate", op, err)
	_, op, err = svc.Ensure(ctx, boxes.Call{UserID: alice, RequestID: "wake", Box: b.ID})
	run("wake", op, err)
	out, err = harness.InBox(bridge, b.ID, []byte(stale), `KEY=$(cat); `+initialize)
	if body, st := status(t, out); err != nil || st != "401" || body != "" {
		t.Fatalf("initialize with the key of the box's previous incarnation: %v, status %s, body %q; want 401 with no body", err, st, body)
	}
	out, err = harness.InBox(bridge, b.ID, nil, withKey(`[ "$KEY" != "`+stale+`" ] || { echo "the key did not change at the wake" >&2; exit 1; }; `+initialize))
	if body, st := status(t, out); err != nil || st != "200" || !strings.Contains(body, "cocoonbox-connect") {
		t.Fatalf("initialize with the woken box's new key: %v, status %s, body %q", err, st, body)
	}
}
