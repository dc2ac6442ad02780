//go:build booted

package boxes

import (
	"context"
	"slices"
	"testing"
)

// A create that takes over one of the supervisor's booted spares
// (docs/box-lifecycle.md, Spares; issue 24, Deliver 9) runs as a box that
// booted itself does: the identity the api wrote, the hostname from its
// name (not the spare's), the claim env, the journal under the machine id
// the api recorded; and it did not wait for a boot.
func TestACreateTakingASpareRunsWithItsIdentityItsHostnameAndItsJournal(t *testing.T) {
	e := newEnv(t)
	st := stepTimes(e.s)
	u := e.user("spare-taker", 1, 1)
	waitSpare(t, v2)
	b, op, err := e.s.Create(context.Background(), Call{UserID: u, RequestID: rid()}, CreateRequest{Name: "from-a-spare", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(u, op)
	tl := st.timeline(op.ID)
	if tl == nil {
		t.Fatal("the create's steps never came")
	}
	var names []string
	for _, sp := range tl.Spans() {
		names = append(names, sp.Step)
	}
	if !slices.Contains(names, "boot.spare") || slices.Contains(names, "boot.systemd") {
		t.Fatalf("the create's steps %v: want a spare taken (boot.spare), no boot (boot.systemd)", names)
	}
	box := e.box(u, b.ID)
	if box.State != Running {
		t.Fatalf("box %+v: want running", box)
	}
	hasItsIdentity(t, box)
}
