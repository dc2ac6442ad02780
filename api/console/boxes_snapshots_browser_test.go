package console_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
	"github.com/cocoonbox/cocoonbox/api/state/snapshot"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// snapshotName is the snapshot addSnapshot writes: a box save's name
// (its start and its operation's id).
const snapshotName = "20260314T150900.000000Z-00000000000000aa"

// addSnapshot writes files (a path under /home/user or /workspace: its
// text) as snapshot snapshotName of user's box into the api's state store,
// as a box save does, each file modified at 14 March 2026 15:09 UTC.
func addSnapshot(t *testing.T, a *apitest.API, user, box string, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	mtime := time.Date(2026, 3, 14, 15, 9, 0, 0, time.UTC)
	for p, text := range files {
		file := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	k, err := a.StateKeys(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := snapshot.Save(ctx, a.State, k, root, []string{"home/user", "workspace"}, box, snapshotName, nil, 0, snapshot.Options{}); err != nil {
		t.Fatalf("save a snapshot of %s: %v", box, err)
	}
}

// Issue 42, Deliver 4 ("the console lists a box's snapshots"): in real
// Chromium the Boxes page lists a box's snapshot with its file count and
// size, browses it from /home/user into a directory, refuses a restore
// under a directory outside /home/user and /workspace and a path outside
// them, each beside its field, restores nothing when the question is
// cancelled, restores a file in place and under a directory into the
// running box (the in-memory supervisor's disk holds it after), and
// refuses a restore into a hibernated box in a sentence.
func TestTheBoxesPageBrowsesAndRestoresASnapshot(t *testing.T) {
	t.Parallel()
	sup := sandboxtest.New("cbdesk:v23-desk")
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	boxesAPI := controlv1connect.NewBoxesClient(http.DefaultClient, a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(a.PersonalToken(a.User.ID)))))
	ctx := context.Background()
	created, err := boxesAPI.Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "snapshots-create", Name: "main", Image: "cbdesk:v23-desk"}))
	if err != nil {
		t.Fatalf("create main: %v", err)
	}
	boxID := created.Msg.Box.BoxId
	addSnapshot(t, a, a.User.ID, "main", map[string]string{
		"home/user/notes.txt":      "the notes as saved\n",
		"home/user/docs/plan.txt":  "the plan as saved\n",
		"workspace/app/main.go":    "package main\n",
		"home/user/docs/draft.txt": "a draft\n",
	})

	u := newUI(t, a.URL)
	u.signIn("alice")
	u.open("/cb/boxes")
	u.waitText("Running")
	u.click(`button[aria-label="Snapshots of main"]`)
	u.waitText("1 snapshot, each of /home/user and /workspace", snapshotName)
	var cells []string
	u.js(`return [...document.querySelectorAll("#snapshots tbody td")].map((td) => td.textContent);`, &cells)
	if len(cells) != 5 || cells[2] != "4" || cells[3] != "58 bytes" {
		t.Errorf("the snapshot's row: %q; want 4 files of 58 bytes", cells)
	}
	u.click(`button[aria-label="Browse snapshot ` + snapshotName + `"]`)
	u.waitText("/home/user in snapshot "+snapshotName, "notes.txt", "docs/")
	u.without("plan.txt")
	u.click(`button[aria-label="Open /home/user/docs"]`)
	u.waitText("/home/user/docs in snapshot", "plan.txt", "draft.txt", "Up to /home/user")
	u.click(`button[aria-label="Restore /home/user/docs/plan.txt"]`)
	var path string
	u.js(`return document.getElementById("restore-path").value;`, &path)
	if path != "/home/user/docs/plan.txt" {
		t.Fatalf("Restore beside plan.txt put %q in the form", path)
	}

	// Refused beside the field: a directory outside the trees, a path
	// outside them.
	confirmed := func(title string) {
		t.Helper()
		u.waitFor("the restore's question", `return document.getElementById("confirm").open;`)
		var got string
		u.js(`return document.getElementById("confirm-title").textContent;`, &got)
		if got != title {
			t.Errorf("the restore asks %q; want %q", got, title)
		}
		u.click("#confirm-ok")
	}
	u.typeIn("#restore-to", "/etc")
	u.click("#restore-submit")
	confirmed("Restore /home/user/docs/plan.txt under /etc?")
	u.waitText(`Restore under: "/etc" is outside /home/user and /workspace`)
	u.invalid("restore-to")
	u.clear("#restore-to")
	u.clear("#restore-path")
	u.typeIn("#restore-path", "/etc/passwd")
	u.click("#restore-submit")
	confirmed("Restore /etc/passwd in place?")
	u.waitText(`Path: "/etc/passwd" is outside /home/user and /workspace`)
	u.invalid("restore-path")

	// Cancel restores nothing; OK restores in place, then under a directory.
	u.click(`button[aria-label="Restore /home/user/docs/plan.txt"]`)
	u.click("#restore-submit")
	u.waitFor("the restore's question", `return document.getElementById("confirm").open;`)
	u.click("#confirm-cancel")
	if _, ok := sup.File(boxID, "/home/user/docs/plan.txt"); ok {
		t.Fatal("a cancelled restore wrote plan.txt into the box")
	}
	u.click("#restore-submit")
	confirmed("Restore /home/user/docs/plan.txt in place?")
	u.waitText("(18 bytes) of /home/user/docs/plan.txt into main in place.")
	if got, ok := sup.File(boxID, "/home/user/docs/plan.txt"); string(got) != "the plan as saved\n" {
		t.Errorf("plan.txt in the box after the restore: %q, %v", got, ok)
	}
	u.typeIn("#restore-to", "/home/user/back")
	u.click("#restore-submit")
	confirmed("Restore /home/user/docs/plan.txt under /home/user/back?")
	u.waitText("into main under /home/user/back.")
	if got, ok := sup.File(boxID, "/home/user/back/home/user/docs/plan.txt"); string(got) != "the plan as saved\n" {
		t.Errorf("plan.txt under /home/user/back after the restore: %q, %v", got, ok)
	}

	// A hibernated box takes no restore: said in a sentence.
	if _, err := boxesAPI.Hibernate(ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: "snapshots-hibernate", Box: "main"})); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "main hibernated", func() (bool, string) {
		resp, err := boxesAPI.Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: "main"}))
		if err != nil {
			return false, err.Error()
		}
		return resp.Msg.Box.State == controlv1.BoxState_BOX_STATE_HIBERNATED, resp.Msg.Box.State.String()
	})
	u.click("#restore-submit")
	confirmed("Restore /home/user/docs/plan.txt under /home/user/back?")
	u.waitText("The box main is not running, and a restore writes into the running box. Wake it first.")
}

// invalid fails unless the field with id is marked invalid, its error
// beside it.
func (u *ui) invalid(id string) {
	u.t.Helper()
	var got struct{ Invalid, Beside string }
	u.js(`const f = document.getElementById(arguments[0]), b = document.getElementById(f.getAttribute("aria-describedby") || "");
return { invalid: f.getAttribute("aria-invalid") || "", beside: b && b.classList.contains("field-error") ? b.textContent : "" };`, &got, id)
	if got.Invalid != "true" || got.Beside == "" {
		u.t.Errorf("#%s: aria-invalid %q, beside it %q; want the refusal beside the field", id, got.Invalid, got.Beside)
	}
}

// snapshotsShown is the every-page suite's state of the Boxes page with
// main's snapshot listed and browsed (TestEveryPageInEveryState).
func snapshotsShown(u *ui) {
	u.click(`button[aria-label="Snapshots of main"]`)
	u.waitText("1 snapshot")
	u.click(`button[aria-label="Browse snapshot ` + snapshotName + `"]`)
	u.waitText("/home/user in snapshot", "notes.txt")
	u.without("Reading the snapshots")
}
