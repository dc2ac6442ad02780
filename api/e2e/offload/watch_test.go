//go:build booted

package offload

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Contract: Offload, Watching ("Before Hibernate or Rebase of a running
// box, the app and the CLI call offload status; a working session gets a
// warning to confirm"): with the stand-in holding its turn (working),
// `cocoonbox box hibernate` and `box upgrade --confirm` refuse without
// --yes, naming the session and what each does to it (hibernate pauses
// it; upgrade restarts it from its last hand-over), in text and as a JSON
// line, and the box stays running; with --yes the hibernate goes on and
// the session is working again once the box wakes. As the control, once the turn is
// released and the session idle, the same check lets the command through
// (an upgrade, whose call the api then refuses for want of a newer image:
// the refusal is the api's, not the watch's).
func TestHibernateAndUpgradeRefusedWhileAnOffloadSessionWorks(t *testing.T) {
	data := t.TempDir()
	top := newRepo(t, "watched", [2]string{"a.txt", "one\n"})
	handOver(t, top, data, "a long turn", "standin: hold")
	mustCLI(t, top, data, "offload", "--box", boxName, "--yes", "--json")
	session := func() string {
		st := mustCLI(t, top, data, "offload", "status", "--json")
		ss, _ := st["sessions"].([]any)
		if len(ss) != 1 {
			return "none"
		}
		s, _ := ss[0].(map[string]any)["status"].(string)
		return s
	}
	wait.Eventually(t, 2*time.Minute, "the session working (the stand-in holding)", func() (bool, string) { s := session(); return s == "working", s })

	for _, c := range []struct {
		args   []string
		effect string
	}{
		{[]string{"box", "hibernate", boxName}, "hibernate pauses it"},
		{[]string{"box", "upgrade", boxName, "--confirm"}, "upgrade restarts it from its last hand-over"},
	} {
		_, code, stderr := cli(t, top, data, c.args...)
		if code != 2 || !strings.Contains(stderr, "is working") || !strings.Contains(stderr, c.effect) || !strings.Contains(stderr, "--yes") || !strings.Contains(stderr, "claude") {
			t.Errorf("cocoonbox %v while a session works: exit %d, stderr %q; want 2 naming the session, %q and --yes", c.args, code, stderr, c.effect)
		}
		line, code, _ := cli(t, top, data, append(c.args, "--json")...)
		working, _ := line["working"].([]any)
		if code != 2 || len(working) != 1 || line["name"] != boxName || !strings.Contains(line["error"].(string), c.effect) {
			t.Errorf("cocoonbox %v --json while a session works: exit %d, %v", c.args, code, line)
		} else if w := working[0].(map[string]any); w["status"] != "working" || w["cli"] != "claude" {
			t.Errorf("the JSON line's session: %v", w)
		}
		if s := boxState(t); s != controlv1.BoxState_BOX_STATE_RUNNING {
			t.Fatalf("after the refused %v the box is %s", c.args, s)
		}
	}

	// --yes goes on: the box hibernates with the turn held, and wakes with
	// the session as it was, paused, not ended.
	mustCLI(t, top, data, "box", "hibernate", boxName, "--yes")
	if s := boxState(t); s != controlv1.BoxState_BOX_STATE_HIBERNATED {
		t.Fatalf("after box hibernate --yes the box is %s", s)
	}
	mustCLI(t, top, data, "box", "ensure", boxName)
	if s := session(); s != "working" {
		t.Fatalf("the session after the hibernate and the wake: %s, want working still", s)
	}

	// The control: the turn released, the session idle, nothing to warn of.
	inBox(t, "runuser -u user -- touch /home/user/.standin/release")
	wait.Eventually(t, 2*time.Minute, "the session idle after the release", func() (bool, string) { s := session(); return s == "idle", s })
	_, code, stderr := cli(t, top, data, "box", "upgrade", boxName, "--confirm")
	if code != 1 || !strings.Contains(stderr, "the latest image of its tier") {
		t.Errorf("box upgrade with the session idle: exit %d, %s; want the watch to let it through to the api's refusal", code, stderr)
	}
	if s := boxState(t); s != controlv1.BoxState_BOX_STATE_RUNNING {
		t.Fatalf("after the upgrade without a newer image the box is %s", s)
	}
	mustCLI(t, top, data, "back", "--json")
}

// boxState is the user's box's state, from the api.
func boxState(t *testing.T) controlv1.BoxState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := harness.Boxes(api.URL, userToken).Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: boxName}))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.Box.State
}
