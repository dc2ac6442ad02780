//go:build booted

package boxcli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// line is one JSON line of a mutating command with --json.
type line struct {
	Seq         uint64 `json:"seq"`
	BoxID       string `json:"box_id"`
	Name        string `json:"name"`
	State       string `json:"state"`
	OperationID string `json:"operation_id"`
	Kind        string `json:"kind"`
	Phase       string `json:"phase"`
	Error       string `json:"error"`
	TotalBytes  int64  `json:"total_bytes"`
}

func parseLines(t *testing.T, out string) []line {
	t.Helper()
	var ls []line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("not a JSON line: %q (%v)\nall:\n%s", s, err, out)
		}
		ls = append(ls, l)
	}
	return ls
}

// followed checks the JSON lines of one operation of kind as the CLI
// prints them: the call's answer first (no seq), then events in seq order,
// each operation line of that operation, the last done; it answers the
// answer line, the operation's phases after it, and the states seen.
func followed(t *testing.T, out, kind string) (line, []string, []string) {
	t.Helper()
	ls := parseLines(t, out)
	first := ls[0]
	if first.Seq != 0 || first.Kind != kind || first.OperationID == "" || first.BoxID == "" {
		t.Fatalf("first line %+v, want the %s call's answer (no seq)\n%s", first, kind, out)
	}
	var phases, states []string
	var seq uint64
	for _, l := range ls[1:] {
		if l.Seq <= seq {
			t.Fatalf("seq %d after %d: out of order\n%s", l.Seq, seq, out)
		}
		seq = l.Seq
		switch {
		case l.State != "" && l.OperationID == "":
			states = append(states, l.State)
		case l.OperationID == first.OperationID:
			phases = append(phases, l.Phase)
		default:
			t.Fatalf("line %+v is neither a state nor operation %s\n%s", l, first.OperationID, out)
		}
	}
	if len(phases) == 0 || phases[len(phases)-1] != "done" {
		t.Fatalf("%s: phases %v, want the last done\n%s", kind, phases, out)
	}
	return first, phases, states
}

// boxesClient is alice's Boxes client straight to the api (gRPC), for the
// log the CLI is compared against.
func boxesClient() controlv1connect.BoxesClient { return harness.Boxes(api.URL, token) }

// opLog reads the box's event log until operation opID has ended and
// answers that operation's events, as the api keeps them.
func opLog(t *testing.T, boxID, opID string) []*controlv1.BoxEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := boxesClient().Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{Box: boxID}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var events []*controlv1.BoxEvent
	for stream.Receive() {
		op := stream.Msg().GetOperation()
		if op.GetOperationId() != opID {
			continue
		}
		events = append(events, stream.Msg())
		if op.Phase == controlv1.Phase_PHASE_DONE || op.Phase == controlv1.Phase_PHASE_FAILED {
			return events
		}
	}
	t.Fatalf("the log of %s ended before operation %s did (%v): %d of its events", boxID, opID, stream.Err(), len(events))
	return nil
}

// eventsAfterReplaysTheOperation: a Boxes call's events_after is the
// cursor just before its operation's first step, so the CLI follows from
// there instead of reading the box's whole log from seq 0: Events after it
// starts at that step, and the box's earlier events (its create's) lie
// before it.
func eventsAfterReplaysTheOperation(t *testing.T, requestID, opID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := boxesClient().Save(ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: requestID, Box: "web"}))
	if err != nil {
		t.Fatal(err)
	}
	after, boxID := r.Msg.EventsAfter, r.Msg.Box.BoxId
	steps := opLog(t, boxID, opID)
	if after == 0 || steps[0].Seq <= after {
		t.Fatalf("events_after %d, the operation's first step at seq %d: want 0 < events_after < it", after, steps[0].Seq)
	}
	stream, err := boxesClient().Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{Box: boxID, After: after}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("Events after %d: nothing (%v)", after, stream.Err())
	}
	if got := stream.Msg(); got.Seq != steps[0].Seq || got.GetOperation().GetOperationId() != opID {
		t.Fatalf("Events after events_after %d began at seq %d (%v), want operation %s's first step at seq %d", after, got.Seq, got.GetOperation(), opID, steps[0].Seq)
	}
}
