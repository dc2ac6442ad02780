//go:build booted

package boxes

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness/gate"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Must show: the api killed (SIGKILL) in the middle of an operation, at
// each phase of each kind, then started again: the operation ends done or
// failed, never stuck; no box is left booted with no row, nor a row with no
// box; and the box (unless deleted) runs again after an Ensure. The api
// drives the daemon through a gate.Step, which holds the supervisor call
// that starts the phase: the kill lands there however fast the step would
// have been (a hibernate or a delete takes milliseconds, a boot seconds).
func TestAPIKilledAtEachPhaseLeavesNoOperationStuckAndRowsAndMachinesAgree(t *testing.T) {
	e := newEnv(t)
	step, yaml := e.stepped()
	api := e.startWith(yaml)
	cases := []struct {
		kind, phase string
		call        string // the supervisor call held in the phase
	}{
		{"create", "PHASE_CREATING", "Boot"},
		{"hibernate", "PHASE_SNAPSHOTTING", "Hibernate"},
		{"ensure", "PHASE_WAKING", "Wake"},
		{"save", "PHASE_SAVING", "Save"},
		{"upgrade", "PHASE_SAVING", "Save"},
		{"upgrade", "PHASE_RESTORING", "Rebase"},
		{"upgrade", "PHASE_RESTORING_FILES", "Exec"},
		{"delete", "PHASE_DELETING", "Delete"},
	}
	for i, cs := range cases {
		name := "crash-" + cs.kind
		tok := e.user(api, "u"+string(rune('a'+i)), 1)
		c := harness.Boxes(api.URL, tok)
		var boxID string
		if cs.kind != "create" {
			r, err := c.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: name, Image: v1}))
			if err != nil {
				t.Fatal(err)
			}
			e.done(c, r.Msg)
			boxID = r.Msg.Box.BoxId
		}
		if cs.kind == "ensure" {
			r, err := c.Hibernate(e.ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: rid(), Box: boxID}))
			if err != nil {
				t.Fatal(err)
			}
			e.done(c, r.Msg)
		}
		arrived := step.Arm(cs.call, boxID) // a create's box: any machine's Boot
		r, err := begin(e, c, cs.kind, name, boxID)
		if err != nil {
			t.Fatalf("%s: %v", cs.kind, err)
		}
		boxID, opID := r.Box.BoxId, r.Operation.OperationId
		select {
		case <-arrived:
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s: the api's %s never reached the gate in 3 minutes (%d held)", cs.kind, cs.call, step.Held())
		}
		if last := e.until(c, boxID, opID, func(op *controlv1.Operation) bool { return op.Phase.String() == cs.phase || ended(op) }); last.Phase.String() != cs.phase {
			t.Fatalf("%s held at %s: the operation is in %s, want %s", cs.kind, cs.call, last.Phase, cs.phase)
		}
		api.Kill()
		// The held call ends with the api's connection; only then does the
		// gate open, so none of it reaches the daemon after the kill.
		wait.Eventually(t, time.Minute, "the killed api's held call gone from the gate", func() (bool, string) {
			n := step.Held()
			return n == 0, fmt.Sprintf("%d calls still held", n)
		})
		step.Release()
		// The kill must have landed mid-operation, or this case shows nothing.
		var under bool
		if err := e.db.Pool.QueryRow(e.ctx, "SELECT ended_at IS NULL FROM box_operations WHERE id = $1", opID).Scan(&under); err != nil || !under {
			t.Fatalf("%s in %s: the operation was not under way at the kill (%v)", cs.kind, cs.phase, err)
		}
		api = e.startWith(yaml)
		c = harness.Boxes(api.URL, tok)
		last := e.until(c, boxID, opID, ended)
		t.Logf("%s killed in %s: after the restart it ended %s %s", cs.kind, cs.phase, last.Phase, last.Error)
		e.agree()
		if cs.kind == "delete" {
			continue
		}
		er, err := c.Ensure(e.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: rid(), Box: boxID}))
		if err != nil {
			t.Fatalf("%s: ensure after the restart: %v", cs.kind, err)
		}
		if er.Msg.Operation != nil {
			e.done(c, er.Msg)
		}
		st, err := c.Status(e.ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: boxID}))
		if err != nil || st.Msg.Box.State != controlv1.BoxState_BOX_STATE_RUNNING {
			t.Fatalf("%s: after the restart and an ensure: %v %v", cs.kind, st, err)
		}
		e.agree()
	}
}

// stepped serves the test's sandboxd behind a gate.Step (nothing armed) on
// a socket of its own, stopped when the test ends, and answers the gate
// and api.yaml's sandbox mapping naming it (host sbx, as start's).
func (e *env) stepped() (*gate.Step, string) {
	e.t.Helper()
	s := gate.NewStep(sandboxd)
	path := filepath.Join(root, fmt.Sprintf("step-%d.sock", seq.Add(1)))
	stop, err := gate.Serve(s, path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Release(); stop() })
	return s, fmt.Sprintf("sandbox:\n  hosts: {sbx: %q}\n", "unix:"+path)
}

// begin starts an operation of kind on the box.
func begin(e *env, c controlv1connect.BoxesClient, kind, name, boxID string) (*controlv1.OperationResponse, error) {
	op := &controlv1.BoxOperationRequest{RequestId: rid(), Box: boxID}
	var resp *controlv1.OperationResponse
	var err error
	switch kind {
	case "create":
		resp, err = msg(c.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: name, Image: v1})))
	case "hibernate":
		resp, err = msg(c.Hibernate(e.ctx, connect.NewRequest(op)))
	case "ensure":
		resp, err = msg(c.Ensure(e.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: rid(), Box: boxID})))
	case "save":
		resp, err = msg(c.Save(e.ctx, connect.NewRequest(op)))
	case "upgrade":
		resp, err = msg(c.Upgrade(e.ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: rid(), Box: boxID, Confirm: true})))
	case "delete":
		resp, err = msg(c.Delete(e.ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: rid(), Box: boxID, Confirm: true})))
	}
	return resp, err
}

func msg[T any](r *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}
