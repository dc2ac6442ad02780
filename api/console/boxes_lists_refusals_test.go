package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
)

// Issue 42 and 43, Deliver 4: every refusal of the Boxes page's snapshot
// and share calls is a plain sentence in "message" (the machine code in
// "error"), with the form's field where it names one: signed out, a body
// not sent as JSON (the console's CSRF defence), another user's box and
// share, a snapshot or path that is not there, a restore unconfirmed, a
// path or directory outside /home/user and /workspace, a restore into a
// hibernated box, days out of range, an api without a supervisor.
func TestTheSnapshotAndShareCallsRefuseInPlainSentences(t *testing.T) {
	t.Parallel()
	sup := sandboxtest.New("cbdesk:v23-desk")
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	bob := a.AddUser("bob", false)
	ctx := context.Background()
	for _, b := range []struct{ id, user, name string }{{"cb-00000000000000a1", a.User.ID, "main"}, {"cb-00000000000000b1", bob.ID, "bobs"}} {
		if _, err := sup.Create(ctx, sandbox.Spec{ID: b.id, Tenant: b.user, Image: "cbdesk:v23-desk"}); err != nil {
			t.Fatal(err)
		}
		if _, err := sup.Boot(ctx, b.id); err != nil {
			t.Fatal(err)
		}
		if _, err := sup.Hibernate(ctx, b.id); err != nil {
			t.Fatal(err)
		}
		if _, err := a.DB.Pool.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
			VALUES ($1, $2, $3, 'cbdesk:v23-desk', 'hibernated', 'host1', $4)`, b.id, b.user, b.name, make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	addSnapshot(t, a, a.User.ID, "main", map[string]string{"home/user/notes.txt": "notes\n"})
	alice, nobody, bobs := a.SignIn("alice"), a.Browser(), a.SignIn("bob")
	resp, body := bobs.Send("POST", "/cb/api/shares", "application/json", `{"box":"bobs"}`)
	var made struct{ Share struct{ ID string } }
	if err := json.Unmarshal([]byte(body), &made); err != nil || resp.StatusCode != 201 {
		t.Fatalf("bob shares bobs: %d %s", resp.StatusCode, body)
	}
	bare := apitest.New(t, apitest.WithoutSession()) // no supervisor
	snap := "/cb/api/boxes/main/snapshots/" + snapshotName
	cases := []refusal{
		{"snapshots, signed out", "GET", "/cb/api/boxes/main/snapshots", "", nobody, 401, "signed_out", ""},
		{"snapshots, a bad name", "GET", "/cb/api/boxes/Not%20OK/snapshots", "", alice, 404, "not_found", ""},
		{"snapshots, no supervisor", "GET", "/cb/api/boxes/main/snapshots", "", bare.SignIn("alice"), 503, "unavailable", ""},
		{"browse, bob's box", "GET", "/cb/api/boxes/bobs/snapshots/" + snapshotName, "", alice, 404, "not_found", ""},
		{"browse, no such snapshot", "GET", "/cb/api/boxes/main/snapshots/20260101T000000.000000Z-00000000000000bb", "", alice, 404, "not_found", ""},
		{"browse, a bad snapshot name", "GET", "/cb/api/boxes/main/snapshots/..x", "", alice, 404, "not_found", ""},
		{"browse, no such path", "GET", snap + "?path=/home/user/nothing", "", alice, 404, "not_found", ""},
		{"browse, outside the trees", "GET", snap + "?path=/etc", "", alice, 400, "invalid", "path"},
		{"restore, not JSON", "POST", snap + "/restore", "", alice, 415, "bad_request", ""},
		{"restore, signed out", "POST", snap + "/restore", `{"path":"/home/user/notes.txt","confirm":true}`, nobody, 401, "signed_out", ""},
		{"restore, no path", "POST", snap + "/restore", `{"confirm":true}`, alice, 400, "invalid", "path"},
		{"restore in place, unconfirmed", "POST", snap + "/restore", `{"path":"/home/user/notes.txt"}`, alice, 400, "confirm", ""},
		{"restore, a path outside", "POST", snap + "/restore", `{"path":"/etc/passwd","confirm":true}`, alice, 400, "invalid", "path"},
		{"restore, a relative path", "POST", snap + "/restore", `{"path":"home/user/notes.txt","confirm":true}`, alice, 400, "invalid", "path"},
		{"restore, under /tmp", "POST", snap + "/restore", `{"path":"/home/user/notes.txt","to":"/tmp"}`, alice, 400, "invalid", "to"},
		{"restore, a hibernated box", "POST", snap + "/restore", `{"path":"/home/user/notes.txt","confirm":true}`, alice, 409, "state", ""},
		{"restore, bob's box", "POST", "/cb/api/boxes/bobs/snapshots/" + snapshotName + "/restore", `{"path":"/home/user/notes.txt","confirm":true}`, alice, 404, "not_found", ""},
		{"shares, signed out", "GET", "/cb/api/shares", "", nobody, 401, "signed_out", ""},
		{"share, not JSON", "POST", "/cb/api/shares", "", alice, 415, "bad_request", ""},
		{"share, no box", "POST", "/cb/api/shares", `{}`, alice, 400, "invalid", "box"},
		{"share, bob's box", "POST", "/cb/api/shares", `{"box":"bobs"}`, alice, 404, "not_found", "box"},
		{"share, 31 days", "POST", "/cb/api/shares", `{"box":"main","days":31}`, alice, 400, "invalid", "days"},
		{"share, -1 days", "POST", "/cb/api/shares", `{"box":"main","days":-1}`, alice, 400, "invalid", "days"},
		{"revoke, bob's share", "DELETE", "/cb/api/shares/" + made.Share.ID, "", alice, 404, "not_found", ""},
		{"revoke, signed out", "DELETE", "/cb/api/shares/" + made.Share.ID, "", nobody, 401, "signed_out", ""},
		{"log, bob's share", "GET", "/cb/api/shares/" + made.Share.ID + "/log", "", alice, 404, "not_found", ""},
	}
	checkRefusals(t, cases, "text/plain")
	// Bob's share still works: alice's refused revoke touched nothing.
	if resp, body := bobs.Send("GET", "/cb/api/shares", "", ""); resp.StatusCode != 200 || !json.Valid([]byte(body)) || !strings.Contains(body, `"live":true`) {
		t.Fatalf("bob's shares after alice's revoke: %d %s", resp.StatusCode, body)
	}
}
