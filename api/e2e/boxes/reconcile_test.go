//go:build booted

package boxes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// At start the api makes rows and machines agree: a machine of one of its
// users that has no box row (what a crash between the two could leave) is
// deleted.
func TestAMachineWithNoRowIsDeletedAtStart(t *testing.T) {
	e := newEnv(t)
	a := e.start()
	e.user(a, "orphan", 1)
	var tenant string
	if err := e.db.Pool.QueryRow(e.ctx, "SELECT id::text FROM users WHERE name = 'orphan'").Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	m, err := sandboxd.Create(e.ctx, sandbox.Spec{ID: "cb-0123456789abcdef", Tenant: tenant, Image: v1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandboxd.Boot(e.ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	a.Kill()
	e.start()
	box.Eventually(t, time.Minute, "the machine without a row is deleted", func() (bool, string) {
		m, err := sandboxd.Get(e.ctx, m.ID)
		return err != nil, fmt.Sprintf("%+v %v", m, err)
	})
	e.agree()
}

// The api with its supervisor in process, killed: the boxes stop with it
// (the next supervisor clears what the dead one left), so the restarted
// api finds each box's machine stopped, marks the box failed, and Ensure
// boots it again as a new incarnation. The box was made from one of the
// supervisor's spares (docs/box-lifecycle.md, Spares), and neither it nor
// the pool's spares outlive the kill: the next supervisor ends their
// processes and removes their cgroups and disks.
func TestAnAPIKilledWithItsLocalSupervisorLeavesItsBoxesFailedAndEnsureBootsThem(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(root, "local-state")
	inProcess := fmt.Sprintf("sandbox:\n  local: {images: %q, state_dir: %q, bridge: cbboxes2, gateway: 10.213.0.1/16, spares: 1}\n",
		filepath.Join(root, "images"), state)
	a := e.startWith(inProcess)
	tok := e.user(a, "local", 1)
	c := harness.Boxes(a.URL, tok)
	spare, err := harness.BootedSpare(e.ctx, state, "cbboxes2")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Create(e.ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: rid(), Name: "inproc", Image: v2}))
	if err != nil {
		t.Fatal(err)
	}
	e.done(c, r.Msg)
	if _, err := os.Stat(filepath.Join(state, "spares", spare)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the create did not take the spare %s: %v", spare, err)
	}
	left, _ := os.ReadDir(filepath.Join(state, "spares"))
	names := []string{spare}
	for _, l := range left {
		names = append(names, l.Name())
	}
	a.Kill()
	a = e.startWith(inProcess)
	c = harness.Boxes(a.URL, tok)
	for _, n := range names {
		for _, d := range []string{"/sys/fs/cgroup/unified/cbsbx-" + n, "/sys/fs/cgroup/systemd/cbsbx-" + n, "/sys/fs/cgroup/cbsbx-" + n, filepath.Join(state, "spares", n), "/run/netns/cbboxes2-" + n} {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the killed api's spare %s left %s: %v", n, d, err)
			}
		}
	}
	// The restarted api's reconcile runs beside its serving: wait for it
	// (a loaded host read running before it ran).
	box.Eventually(t, time.Minute, "the box failed after the kill", func() (bool, string) {
		st, err := c.Status(e.ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: "inproc"}))
		if err != nil {
			t.Fatal(err)
		}
		return st.Msg.Box.State == controlv1.BoxState_BOX_STATE_FAILED, st.Msg.Box.State.String()
	})
	er, err := c.Ensure(e.ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: rid(), Box: "inproc", Incarnation: 1}))
	if err != nil || er.Msg.Operation == nil {
		t.Fatalf("ensure: %v %v", er, err)
	}
	e.done(c, er.Msg)
	st, err := c.Status(e.ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: "inproc"}))
	if err != nil || st.Msg.Box.State != controlv1.BoxState_BOX_STATE_RUNNING || st.Msg.Box.Incarnation != 2 {
		t.Fatalf("after the ensure: %v %v, want running at incarnation 2", st, err)
	}
	dr, err := c.Delete(e.ctx, connect.NewRequest(&controlv1.ConfirmedBoxRequest{RequestId: rid(), Box: "inproc", Confirm: true}))
	if err != nil {
		t.Fatal(err)
	}
	e.done(c, dr.Msg)
}
