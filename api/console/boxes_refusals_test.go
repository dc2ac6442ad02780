package console_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
)

// Issue 43, Deliver 3: every refusal of the Boxes page's calls is a plain
// sentence in "message" naming the box (the machine code in "error"):
// signed out, another user's box, no such action, a bad or taken name, Delete and Upgrade
// without the confirmation, a box in the wrong state, a box busy with
// another operation, an api without a supervisor.
func TestTheBoxesCallsRefuseInPlainSentences(t *testing.T) {
	t.Parallel()
	sup := sandboxtest.New("cbdesk:v23-desk", "cbdesk:v24-desk")
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	bob := a.AddUser("bob", false)
	ctx := context.Background()
	for _, b := range []struct{ id, user, name string }{
		{"cb-00000000000000a1", a.User.ID, "main"}, {"cb-00000000000000a2", a.User.ID, "spare"}, {"cb-00000000000000b1", bob.ID, "bobs"}} {
		// The machine exists, hibernated, before its row: the api's
		// reconcile at start fails a row whose machine is missing, and
		// under load it ran after the rows were written (main failed).
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
	alice, nobody := a.SignIn("alice"), a.Browser()
	// A save held at its start by the supervisor: main is busy with it.
	release := sup.Hold()
	defer release()
	if resp, body := alice.Send("POST", "/cb/api/boxes/main/save", "application/json", `{}`); resp.StatusCode != 202 {
		t.Fatalf("save main: %d %s", resp.StatusCode, body)
	}
	bare := apitest.New(t, apitest.WithoutSession()) // no supervisor
	cases := []struct {
		name, path, body string
		as               *apitest.Browser
		status           int
		code             string
	}{
		{"signed out", "/cb/api/boxes/main/hibernate", `{}`, nobody, 401, "signed_out"},
		{"bob's box", "/cb/api/boxes/bobs/save", `{}`, alice, 404, "not_found"},
		{"no such box", "/cb/api/boxes/nothing/wake", `{}`, alice, 404, "not_found"},
		{"no such action", "/cb/api/boxes/main/explode", `{}`, alice, 404, "not_found"},
		{"delete unconfirmed", "/cb/api/boxes/main/delete", `{}`, alice, 400, "confirm"},
		{"upgrade unconfirmed", "/cb/api/boxes/main/upgrade", `{"confirm":false}`, alice, 400, "confirm"},
		{"busy", "/cb/api/boxes/main/hibernate", `{}`, alice, 409, "busy"},
		{"hibernated already", "/cb/api/boxes/spare/hibernate", `{}`, alice, 409, "state"},
		{"upgrade of a hibernated box", "/cb/api/boxes/spare/upgrade", `{"confirm":true}`, alice, 409, "state"},
		{"a bad request id", "/cb/api/boxes/main/wake", `{"request_id":"not one!"}`, alice, 400, "invalid"},
		{"no supervisor", "/cb/api/boxes/main/wake", `{}`, bare.SignIn("alice"), 503, "unavailable"},
		{"make, a bad name", "/cb/api/boxes", `{"name":"Not OK"}`, alice, 400, "invalid"},
		{"make, a name taken", "/cb/api/boxes", `{"name":"main"}`, alice, 409, "exists"},
		{"make, no supervisor", "/cb/api/boxes", `{"name":"demo"}`, bare.SignIn("alice"), 503, "unavailable"},
		{"not JSON", "/cb/api/boxes/main/wake", "", alice, 415, "bad_request"},
	}
	for _, c := range cases {
		ctype := "application/json"
		if c.body == "" {
			ctype = "text/plain"
		}
		resp, body := c.as.Send("POST", c.path, ctype, c.body)
		var got struct{ Error, Message string }
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != c.status {
			t.Errorf("%s: POST %s answered %d %s; want %d JSON", c.name, c.path, resp.StatusCode, body, c.status)
			continue
		}
		if got.Error != c.code {
			t.Errorf("%s: error %q; want %q", c.name, got.Error, c.code)
		}
		if got.Message == "" || codeLike.MatchString(got.Message) {
			t.Errorf("%s: message %q is not a plain sentence (answer %s)", c.name, got.Message, body)
		}
		t.Logf("%s: %s", c.name, got.Message)
	}
}
