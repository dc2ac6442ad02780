//go:build booted

package boxes

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// `cocoonbox-api users delete` beside a running api whose api.yaml sets
// boxes.recover_every: the api runs its passes at that interval (its log
// says so), the admin command names the key, and the deleted user's running
// box's machine is gone from the daemon at a pass.
func TestUsersDeleteBesideARunningAPIRemovesTheirMachine(t *testing.T) {
	e := newEnv(t)
	a := e.startWith(fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\nboxes:\n  recover_every: 2s\n", "unix:"+socket))
	if log := a.Log(); !strings.Contains(log, "recover_every=2s") {
		t.Fatalf("the api's log does not name recover_every=2s:\n%s", log)
	}
	tok := e.user(a, "leaver", 1)
	c := harness.Boxes(a.URL, tok)
	r, err := c.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: "left", Image: v1}))
	if err != nil {
		t.Fatal(err)
	}
	e.done(c, r.Msg)
	id := r.Msg.Box.BoxId
	out, err := a.Admin(e.ctx, "", "users", "delete", "leaver", "--confirm")
	if err != nil {
		t.Fatal(err)
	}
	if want := "their 1 boxes' machines and saves are removed from their hosts by a running api's next recovery pass (every boxes.recover_every of its api.yaml, 15s by default)"; !strings.Contains(out, want) {
		t.Fatalf("users delete said %q, want %q", out, want)
	}
	wait.Eventually(t, time.Minute, "the deleted user's machine removed by a pass", func() (bool, string) {
		m, err := sandboxd.Get(e.ctx, id)
		return errors.Is(err, sandbox.ErrNotFound), fmt.Sprintf("%+v %v", m, err)
	})
	e.agree()
}
