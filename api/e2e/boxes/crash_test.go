//go:build booted

package boxes

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// Must show: the api killed (SIGKILL) in the middle of an operation, at
// each phase of each kind, then started again: the operation ends done or
// failed, never stuck; no box is left booted with no row, nor a row with no
// box; and the box (unless deleted) runs again after an Ensure.
func TestAPIKilledAtEachPhaseLeavesNoOperationStuckAndRowsAndMachinesAgree(t *testing.T) {
	e := newEnv(t)
	api := e.start()
	cases := []struct {
		kind, phase string
	}{
		{"create", "PHASE_CREATING"},
		{"hibernate", "PHASE_SNAPSHOTTING"},
		{"ensure", "PHASE_WAKING"},
		{"save", "PHASE_SAVING"},
		{"upgrade", "PHASE_SAVING"},
		{"upgrade", "PHASE_RESTORING"},
		{"upgrade", "PHASE_RESTORING_FILES"},
		{"delete", "PHASE_DELETING"},
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
		// A hibernate, a wake and a delete (a kill, no halt) end within tens
		// to hundreds of milliseconds now, before
		// a kill sent on seeing their phase lands: the test holds the box's
		// advisory lock, so the runner waits in its phase until the kill.
		release := func() {}
		if cs.kind == "hibernate" || cs.kind == "ensure" || cs.kind == "delete" {
			release = holdBox(e, boxID)
		}
		r, err := begin(e, c, cs.kind, name, boxID)
		if err != nil {
			t.Fatalf("%s: %v", cs.kind, err)
		}
		boxID, opID := r.Box.BoxId, r.Operation.OperationId
		if r.Operation.Phase.String() != cs.phase {
			e.until(c, boxID, opID, func(op *controlv1.Operation) bool { return op.Phase.String() == cs.phase || ended(op) })
		}
		api.Kill()
		release()
		// The kill must have landed mid-operation, or this case shows nothing.
		var under bool
		if err := e.db.Pool.QueryRow(e.ctx, "SELECT ended_at IS NULL FROM box_operations WHERE id = $1", opID).Scan(&under); err != nil || !under {
			t.Fatalf("%s in %s: the operation was not under way at the kill (%v)", cs.kind, cs.phase, err)
		}
		api = e.start()
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

// holdBox takes box boxID's advisory lock (api/boxes' lockKey: the first 8
// bytes of the SHA-256 of "cocoonbox boxes box ID") on a connection of its
// own; the runner of the box's next operation waits for it. The returned
// func releases it.
func holdBox(e *env, boxID string) func() {
	e.t.Helper()
	sum := sha256.Sum256([]byte("cocoonbox boxes box " + boxID))
	key := int64(binary.BigEndian.Uint64(sum[:8]))
	conn, err := e.db.Pool.Acquire(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := conn.Exec(e.ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Release()
		e.t.Fatal(err)
	}
	return func() {
		if _, err := conn.Exec(e.ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			e.t.Error(err)
		}
		conn.Release()
	}
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
