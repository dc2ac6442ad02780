//go:build booted

package boxes

import (
	"context"
	"errors"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// Deleting a user (cocoonbox-api users delete) leaves nothing of theirs on
// the supervisor: their running box's machine, its save and the save a
// deleted box of theirs kept are removed by the next sweep; a leftover on
// a host this api lacks is left for an api that has it.
func TestDeletingAUserRemovesTheirMachinesAndSaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	u := e.user("leaving", 2, 2)
	kept := e.create(u, "kept")
	e.do(u, e.s.Save, kept.ID)
	keptSave := e.box(u, kept.ID).SaveID
	gone := e.create(u, "gone")
	e.do(u, e.s.Save, gone.ID)
	goneSave := e.box(u, gone.ID).SaveID
	e.do(u, e.s.Delete, gone.ID)
	if _, err := e.db.Pool.Exec(ctx, "INSERT INTO box_leftovers (kind, id, host) VALUES ('machine', 'cb-00000000000000ee', 'elsewhere')"); err != nil {
		t.Fatal(err)
	}
	if err := users.NewStore(e.db.Pool).Delete(ctx, "leaving"); err != nil {
		t.Fatal(err)
	}
	if _, err := sup.Get(ctx, kept.ID); err != nil {
		t.Fatalf("control: before the sweep the deleted user's machine is there: %v", err)
	}
	e.s.sweep(ctx)
	if _, err := sup.Get(ctx, kept.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the deleted user's machine after the sweep: %v", err)
	}
	for what, id := range map[string]string{"the running box's save": keptSave, "the deleted box's kept save": goneSave} {
		if err := sup.DeleteSave(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s %s after the sweep: %v (want it gone)", what, id, err)
		}
	}
	var left []string
	rows, _ := e.db.Pool.Query(ctx, "SELECT kind || ' ' || id || ' on ' || host FROM box_leftovers")
	for rows.Next() {
		var l string
		rows.Scan(&l)
		left = append(left, l)
	}
	rows.Close()
	if len(left) != 1 || left[0] != "machine cb-00000000000000ee on elsewhere" {
		t.Fatalf("leftovers after the sweep: %q; want only the other host's", left)
	}
}
