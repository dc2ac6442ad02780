//go:build booted

package local

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/gw"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// gwUp is the gw stand-in the package's supervisor's gw door forwards to.
var gwUp *gwtest.Server

// Contract: Box API keys, Model usage ("GW_API_KEY=unprovisioned ... the
// egress proxy injects the box's own key, so the guest never holds
// one"); issue 46, Must show: in a booted box, curl $GW_BASE_URL/models
// with Bearer $GW_API_KEY reaches gw with the owner's real key, through
// the egress proxy and straight to the door alike, while the box holds
// unprovisioned: not in agent.env, the environment of any process, the
// claim env file or any file under /etc, /run, /var, /home, /root, /tmp.
// Control: with the entry gone, the same call is refused by the door.
func TestABoxReachesGWWithItsOwnersKeyWhileItHoldsUnprovisioned(t *testing.T) {
	t.Parallel()
	k, err := gw.New(gwUp.URL, gwUp.MasterKey, nil).Generate(context.Background(), "owner-46", "", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	m := boot(t, v1)
	if err := sup.SetClaimEnv(context.Background(), m.ID, []sandbox.ClaimEntry{{Name: "CBGW", Value: k.Value}}); err != nil {
		t.Fatal(err)
	}
	const call = `set -a; . /etc/cocoonbox/agent.env; set +a; . /etc/profile.d/cocoonbox-egress.sh
echo "GW_API_KEY=$GW_API_KEY"
curl -sS --max-time 60 %s "$GW_BASE_URL/models" -H "Authorization: Bearer $GW_API_KEY"`
	for _, how := range []string{"", "--noproxy '*'"} {
		before := len(gwUp.Calls())
		out, code := sh(t, m.ID, fmt.Sprintf(call, how))
		if code != 0 || !strings.Contains(out, "GW_API_KEY=unprovisioned") || !strings.Contains(out, gwtest.Models[0].ID) {
			t.Fatalf("curl %s in the box exited %d:\n%s", how, code, out)
		}
		calls := gwUp.Calls()[before:]
		seen := false
		for _, c := range calls {
			seen = seen || (c.Key == k.Value && c.Path == "/v1/models")
		}
		if !seen {
			t.Fatalf("curl %s: gw did not see the owner's key on /v1/models: %d calls since", how, len(calls))
		}
	}
	// The key's value, searched for in the box as root. The command line
	// holds it in two halves (a command's unit file under /run keeps its
	// line), joined by the shell.
	half := len(k.Value) / 2
	grep := fmt.Sprintf(`k=%q%q
for f in /proc/[0-9]*/environ; do grep -lF "$k" "$f"; done 2>/dev/null
grep -rlF "$k" /etc /run /var /home /root /tmp 2>/dev/null; echo done`, k.Value[:half], k.Value[half:])
	if out, _ := sh(t, m.ID, grep); strings.TrimSpace(out) != "done" {
		t.Fatalf("the box holds the owner's gw key:\n%s", out)
	}
	// Control: the same call once the entry is gone.
	if err := sup.SetClaimEnv(context.Background(), m.ID, nil); err != nil {
		t.Fatal(err)
	}
	if out, _ := sh(t, m.ID, fmt.Sprintf(call, "")); !strings.Contains(out, "gw_key_missing") {
		t.Fatalf("without the entry: %s, want the door's gw_key_missing", out)
	}
}
