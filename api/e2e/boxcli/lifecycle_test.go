//go:build booted

package boxcli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// sessionExec is a Session.Exec call's line in the api's request log.
const sessionExec = "path=" + controlv1connect.SessionExecProcedure + " "

// boxJSON is what boxes --json and box status --json say of a box.
type boxJSON struct {
	BoxID            string `json:"box_id"`
	Name             string `json:"name"`
	State            string `json:"state"`
	Image            string `json:"image"`
	LastSavedAtMs    int64  `json:"last_saved_at_ms"`
	LatestImage      string `json:"latest_image"`
	UpgradeAvailable bool   `json:"upgrade_available"`
}

func status(t *testing.T, name string) boxJSON {
	t.Helper()
	var b boxJSON
	if err := json.Unmarshal([]byte(ok(t, "box", "status", name, "--json")), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func list(t *testing.T) []boxJSON {
	t.Helper()
	var bs []boxJSON
	if err := json.Unmarshal([]byte(ok(t, "boxes", "--json")), &bs); err != nil {
		t.Fatal(err)
	}
	return bs
}

// One box through every command, each operation followed to done, its
// JSON lines checked; the subtests share the box and run in order.
func TestEveryBoxCommandFollowsItsOperationToDone(t *testing.T) {
	if bs := list(t); len(bs) != 0 {
		t.Fatalf("boxes before any create: %+v", bs)
	}
	if st := status(t, ""); st.State != "absent" || st.LatestImage != "cbdesk:v2-base" {
		t.Fatalf("box status without a box: %+v, want state absent and the latest image", st)
	}
	// An unknown image: refused, naming it; no box made.
	if r := cli(t, "box", "create", "web", "--image", "cbdesk:v9-base"); r.code != 1 || !strings.Contains(r.stderr, "cbdesk:v9-base") || len(list(t)) != 0 {
		t.Fatalf("create with an unknown image: exit %d %s", r.code, r.stderr)
	}
	var id string
	t.Run("images", func(t *testing.T) {
		var im struct {
			Images []struct{ Ref string } `json:"images"`
			Latest string                 `json:"latest"`
		}
		if err := json.Unmarshal([]byte(ok(t, "images", "--json")), &im); err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, i := range im.Images {
			refs = append(refs, i.Ref)
		}
		if !slices.Equal(refs, []string{"cbdesk:v1-base", "cbdesk:v2-base"}) || im.Latest != "cbdesk:v2-base" {
			t.Fatalf("images --json: %v, latest %q", refs, im.Latest)
		}
		if out := ok(t, "images"); !strings.Contains(out, "* cbdesk:v2-base") {
			t.Fatalf("images marks no latest:\n%s", out)
		}
	})
	t.Run("create", func(t *testing.T) {
		first, phases, states := followed(t, ok(t, "box", "create", "web", "--image", "cbdesk:v1-base", "--json"), "create")
		if first.Name != "web" || !strings.HasPrefix(first.BoxID, "cb-") || phases[0] != "creating" || !slices.Contains(states, "running") {
			t.Fatalf("create: answer %+v, phases %v, states %v", first, phases, states)
		}
		id = first.BoxID
		bs := list(t)
		if len(bs) != 1 || bs[0].BoxID != id || bs[0].State != "running" || bs[0].Image != "cbdesk:v1-base" {
			t.Fatalf("boxes --json after create: %+v", bs)
		}
		if st := status(t, "web"); st.State != "running" || !st.UpgradeAvailable || st.LatestImage != "cbdesk:v2-base" {
			t.Fatalf("box status web: %+v", st)
		}
		if out := ok(t, "boxes"); !strings.Contains(out, "web") || !strings.Contains(out, id) || !strings.Contains(out, "running") {
			t.Fatalf("boxes:\n%s", out)
		}
		if out := ok(t, "box", "status", id); !strings.Contains(out, "upgrade available") {
			t.Fatalf("box status %s (by id):\n%s", id, out)
		}
	})
	if id == "" {
		t.FailNow()
	}
	t.Run("bad input", func(t *testing.T) { badInput(t, id) })
	t.Run("hibernate", func(t *testing.T) {
		// Contract: Offload, Watching: the CLI reads the box's offload
		// status first (one Session.Exec); no session works, so it goes on.
		execs := strings.Count(api.Log(), sessionExec)
		out := okSaid(t, "box", "hibernate", "web")
		if !strings.Contains(out, "hibernate done in") || status(t, "web").State != "hibernated" {
			t.Fatalf("box hibernate web:\n%s", out)
		}
		if n := strings.Count(api.Log(), sessionExec) - execs; n != 1 {
			t.Fatalf("box hibernate made %d Session.Exec calls, want 1: cocoonbox-agent offload status before it", n)
		}
	})
	t.Run("ensure", func(t *testing.T) {
		// Without a NAME: the first box.
		_, phases, states := followed(t, ok(t, "box", "ensure", "--json"), "ensure")
		if phases[0] != "waking" || states[len(states)-1] != "running" {
			t.Fatalf("ensure: phases %v, states %v", phases, states)
		}
		out := okSaid(t, "box", "ensure", "web")
		if !strings.Contains(out, "running already: nothing to do") {
			t.Fatalf("ensure of a running box:\n%s", out)
		}
		ls := parseLines(t, ok(t, "box", "ensure", "web", "--json"))
		if len(ls) != 1 || ls[0].State != "running" || ls[0].OperationID != "" {
			t.Fatalf("ensure --json of a running box: %+v", ls)
		}
	})
	t.Run("hibernate, an image without offload status", func(t *testing.T) { olderImage(t, id) })
	t.Run("terminal", func(t *testing.T) { onTerminal(t) })
	t.Run("lost answer", func(t *testing.T) { lostAnswer(t, id) })
	t.Run("save", func(t *testing.T) {
		out := ok(t, "box", "save", "web", "--request-id", "boxcli-save-1", "--json")
		first, phases, _ := followed(t, out, "save")
		ls := parseLines(t, out)
		if !slices.Contains(phases, "saving") || ls[len(ls)-1].TotalBytes <= 0 || status(t, "web").LastSavedAtMs == 0 {
			t.Fatalf("save: phases %v, last %+v", phases, ls[len(ls)-1])
		}
		// The same request id again: the first call's operation, over.
		again := parseLines(t, ok(t, "box", "save", "web", "--request-id", "boxcli-save-1", "--json"))
		if len(again) != 1 || again[0].OperationID != first.OperationID || again[0].Phase != "done" {
			t.Fatalf("save with the same request id: %+v, want the first's %s, done", again, first.OperationID)
		}
		eventsAfterReplaysTheOperation(t, "boxcli-save-1", first.OperationID)
	})
	t.Run("upgrade, its event stream dropped", func(t *testing.T) { droppedStream(t, id) })
	t.Run("delete", func(t *testing.T) {
		r := cli(t, "box", "delete", "web")
		if r.code != 2 || !strings.Contains(r.stderr, `box delete "web" needs --confirm`) || status(t, "web").State != "running" {
			t.Fatalf("delete without --confirm: exit %d %s", r.code, r.stderr)
		}
		_, phases, _ := followed(t, ok(t, "box", "delete", "web", "--confirm", "--json"), "delete")
		if !slices.Contains(phases, "deleting") || len(list(t)) != 0 {
			t.Fatalf("delete: phases %v, boxes %+v", phases, list(t))
		}
		if out := ok(t, "boxes"); !strings.Contains(out, "No boxes yet") {
			t.Fatalf("boxes after delete:\n%s", out)
		}
	})
}
