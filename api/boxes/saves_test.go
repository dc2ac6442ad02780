//go:build booted

package boxes

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
)

// Must show: save, delete, restore: a file in /home/user comes back. A
// user restores with Create{Restore: true} under the deleted box's name:
// Delete keeps the box's newest save for it.
func TestSaveDeleteThenCreateWithRestoreBringsAFileInHomeBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("saver", 1, 1)
	ctx := context.Background()
	b := e.create(u, "keeper")
	sh(t, b.ID, `echo "written just before the save" >/home/user/notes.txt; chown user:user /home/user/notes.txt`)
	_, op, err := e.s.Save(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	steps := e.wait(u, op)
	last := steps[len(steps)-1]
	if last.TotalBytes <= 0 {
		t.Fatalf("the save's total_bytes is %d", last.TotalBytes)
	}
	saved := e.box(u, b.ID)
	if saved.SaveID == "" || saved.SaveSize != last.TotalBytes || saved.SavedAt.IsZero() {
		t.Fatalf("the box's save: %q %d %v; the operation said %d bytes", saved.SaveID, saved.SaveSize, saved.SavedAt, last.TotalBytes)
	}
	_, op, err = e.s.Delete(ctx, Call{UserID: u, RequestID: rid(), Box: b.ID})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(u, op)
	if _, err := sup.Get(ctx, b.ID); err == nil {
		t.Fatalf("machine %s is still there after the delete", b.ID)
	}
	if list, _ := e.s.List(ctx, u); len(list) != 0 {
		t.Fatalf("boxes after the delete: %v", list)
	}
	// A name with no kept save has nothing to restore; the deleted box's
	// name brings the file back.
	if _, _, err := e.s.Create(ctx, Call{UserID: u, RequestID: rid()}, CreateRequest{Name: "other", Restore: true}); !strings.Contains(errString(err), `restore: no save of a deleted box named "other"`) {
		t.Fatalf("a restore with no kept save: %v", err)
	}
	r, op, err := e.s.Create(ctx, Call{UserID: u, RequestID: rid()}, CreateRequest{Name: "keeper", Restore: true})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(u, op)
	if r.ID == b.ID {
		t.Fatalf("the restored box has the deleted one's id %s", b.ID)
	}
	if got := sh(t, r.ID, "stat -c %U /home/user/notes.txt; cat /home/user/notes.txt"); got != "user\nwritten just before the save\n" {
		t.Fatalf("after the restore /home/user/notes.txt: %q", got)
	}
	// The kept save was used up by the restore.
	var kept int
	if err := e.db.Pool.QueryRow(ctx, "SELECT count(*) FROM box_saves").Scan(&kept); err != nil || kept != 0 {
		t.Fatalf("%d saves kept after the restore (%v)", kept, err)
	}
}

// Must show: Upgrade onto a newer image keeps /home/user and /workspace
// and changes /etc/cocoonbox/image; its phases are saving, restoring,
// restoring_files, and the box has a new incarnation.
func TestUpgradeKeepsHomeAndWorkspaceAndChangesTheImage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("upgrader", 1, 1)
	ctx := context.Background()
	b := e.create(u, "upgrader")
	if latest, avail, err := e.s.LatestFor(ctx, b); err != nil || latest != v2 || !avail {
		t.Fatalf("latest for %s: %s %v %v, want %s available", b.Image, latest, avail, err, v2)
	}
	sh(t, b.ID, `mkdir -p /workspace && echo home >/home/user/kept && echo ws >/workspace/kept && echo etc >/etc/dropped`)
	_, op, err := e.s.Upgrade(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name, Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, s := range e.wait(u, op) {
		if len(phases) == 0 || phases[len(phases)-1] != s.Phase.String() {
			phases = append(phases, s.Phase.String())
		}
	}
	if got := strings.Join(phases, ","); got != "PHASE_SAVING,PHASE_RESTORING,PHASE_RESTORING_FILES,PHASE_DONE" {
		t.Fatalf("phases %s", got)
	}
	up := e.box(u, b.ID)
	if up.Image != v2 || up.Incarnation != 2 || up.State != Running {
		t.Fatalf("after the upgrade: image %s incarnation %d state %s", up.Image, up.Incarnation, up.State)
	}
	if got := sh(t, b.ID, "cat /home/user/kept /workspace/kept; head -1 /etc/cocoonbox/image; test -e /etc/dropped || echo dropped"); got != "home\nws\ncbdesk:v2\ndropped\n" {
		t.Fatalf("after the upgrade: %q", got)
	}
	hostname(t, b.ID, b.Name)
	// The next upgrade has nowhere to go.
	if _, _, err := e.s.Upgrade(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name}); !strings.Contains(errString(err), "latest image") {
		t.Fatalf("an upgrade on the latest image: %v", err)
	}
	if m, _ := sup.Get(ctx, b.ID); m.Image != v2 || m.State != sandbox.Running {
		t.Fatalf("the machine: %+v", m)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A hibernated box deletes like a running one: its machine goes, and the
// user may create a box again (max_boxes 1).
func TestAHibernatedBoxDeletes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("frozen", 1, 1)
	ctx := context.Background()
	b := e.create(u, "frozen")
	e.do(u, e.s.Hibernate, b.ID)
	e.do(u, e.s.Delete, b.ID)
	if _, err := sup.Get(ctx, b.ID); err == nil {
		t.Fatalf("machine %s is still there", b.ID)
	}
	e.create(u, "thawed")
}

// A hibernated box saves without waking: it stays hibernated (its machine
// frozen, the process started before it still there after the wake), and
// the save carries a file written before the hibernate.
func TestAHibernatedBoxSavesWithoutWaking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("sleeper", 1, 1)
	ctx := context.Background()
	b := e.create(u, "sleeper")
	sh(t, b.ID, `echo "written before the hibernate" >/home/user/notes.txt; setsid sleep infinity </dev/null >/dev/null 2>&1 & echo $! >/run/sleeper.pid`)
	e.do(u, e.s.Hibernate, b.ID)
	if _, _, err := e.s.Hibernate(ctx, Call{UserID: u, RequestID: rid(), Box: b.ID}); !errors.Is(err, ErrState) ||
		!strings.Contains(err.Error(), "box sleeper is hibernated; hibernate needs it running") {
		t.Fatalf("a hibernate of the hibernated box: %v", err)
	}
	_, op, err := e.s.Save(ctx, Call{UserID: u, RequestID: rid(), Box: b.ID})
	if err != nil {
		t.Fatalf("save of a hibernated box: %v", err)
	}
	steps := e.wait(u, op)
	if last := steps[len(steps)-1]; last.TotalBytes <= 0 {
		t.Fatalf("the save's total_bytes is %d", last.TotalBytes)
	}
	if got := e.box(u, b.ID); got.State != Hibernated || got.SaveID == "" {
		t.Fatalf("after the save the box is %s with save %q; want hibernated with a save", got.State, got.SaveID)
	}
	if m, err := sup.Get(ctx, b.ID); err != nil || m.State != sandbox.Hibernated {
		t.Fatalf("after the save the machine is %v (%v); want hibernated", m.State, err)
	}
	e.do(u, e.s.Ensure, b.ID)
	if got := sh(t, b.ID, `kill -0 "$(cat /run/sleeper.pid)" && echo alive`); got != "alive\n" {
		t.Fatalf("the process started before the hibernate after the save and wake: %q", got)
	}
	e.do(u, e.s.Delete, b.ID)
	r, op, err := e.s.Create(ctx, Call{UserID: u, RequestID: rid()}, CreateRequest{Name: "sleeper", Restore: true})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(u, op)
	if got := sh(t, r.ID, "cat /home/user/notes.txt"); got != "written before the hibernate\n" {
		t.Fatalf("restored from the hibernated box's save: %q", got)
	}
}

// A save run again after a crash left the first run's save on the
// supervisor, recorded nowhere (the supervisor named saves, so the api
// could not record one before it existed). The save is now named after
// its operation: here the first run's save is made under that name while
// the operation is held under way (the box's advisory lock, as a dead
// api's runner holds it), and the run that follows replaces it: the box
// records that save and the machine has no other.
func TestASaveRunAgainReplacesTheFirstRunsSave(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.user("resaver", 1, 1)
	ctx := context.Background()
	b := e.create(u, "resaved")
	release := e.hold(b.ID)
	_, op, err := e.s.Save(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	first, err := sup.Save(ctx, b.ID, saveName(op.ID))
	if err != nil {
		t.Fatal(err)
	}
	release()
	e.wait(u, op)
	if got := e.box(u, b.ID).SaveID; got != first.ID {
		t.Fatalf("the box records save %q, not %q, the one its operation's first run made", got, first.ID)
	}
	if saves := savesOf(t, b.ID); len(saves) != 1 || saves[0] != first.ID {
		t.Fatalf("the machine's saves on the supervisor: %v, want %s alone", saves, first.ID)
	}
}

// savesOf lists the local supervisor's saves of machine id.
func savesOf(t *testing.T, id string) []string {
	t.Helper()
	all, err := localtest.Saves(filepath.Join(testRoot, "state"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, info := range all {
		if info.Machine == id {
			out = append(out, info.ID)
		}
	}
	return out
}
