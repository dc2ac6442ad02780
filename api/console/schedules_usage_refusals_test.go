package console_test

import (
	"encoding/json"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
)

// Issue 46: every refusal the Schedules and Usage pages show is a plain
// sentence in "message" (the machine code in "error"), the field's as the
// form names it: signed out, a box not the user's, each bad field, a
// schedule gone, a gw that does not answer.
func TestTheSchedulesAndUsageRefusalsArePlainSentences(t *testing.T) {
	t.Parallel()
	g := gwtest.New()
	a := apitest.New(t, apitest.WithGW(g), apitest.WithoutSession())
	addBox(t, a, a.User.ID, "cb-00000000000000a1", "main")
	bob := a.AddUser("bob", false)
	addBox(t, a, bob.ID, "cb-00000000000000b1", "bobs")
	alice, nobody := a.SignIn("alice"), a.Browser()
	g.Close() // the Usage call's gw does not answer
	cases := []refusal{
		{"list, signed out", "GET", "/cb/api/schedules", "", nobody, 401, "signed_out", ""},
		{"set, signed out", "POST", "/cb/api/schedules", `{"box":"main","cron":"@daily"}`, nobody, 401, "signed_out", ""},
		{"set, bob's box", "POST", "/cb/api/schedules", `{"box":"bobs","cron":"@daily"}`, alice, 404, "not_found", ""},
		{"set, no box", "POST", "/cb/api/schedules", `{"cron":"@daily"}`, alice, 400, "invalid", "box"},
		{"set, neither", "POST", "/cb/api/schedules", `{"box":"main"}`, alice, 400, "invalid", "at"},
		{"set, a bad cron", "POST", "/cb/api/schedules", `{"box":"main","cron":"every morning"}`, alice, 400, "invalid", "cron"},
		{"set, a bad zone", "POST", "/cb/api/schedules", `{"box":"main","cron":"@daily","time_zone":"Mars/Olympus"}`, alice, 400, "invalid", "time_zone"},
		{"set, a bad time", "POST", "/cb/api/schedules", `{"box":"main","at":"tomorrow"}`, alice, 400, "invalid", "at"},
		{"set, a past time", "POST", "/cb/api/schedules", `{"box":"main","at":"2020-01-01T07:30"}`, alice, 400, "invalid", "at"},
		{"set, keep-up too long", "POST", "/cb/api/schedules", `{"box":"main","cron":"@daily","keep_up_minutes":"10081"}`, alice, 400, "invalid", "keep_up_minutes"},
		{"set, keep-up not whole", "POST", "/cb/api/schedules", `{"box":"main","cron":"@daily","keep_up_minutes":"1.5"}`, alice, 400, "invalid", "keep_up_minutes"},
		{"clear, gone", "DELETE", "/cb/api/schedules/main/999", "", alice, 404, "not_found", ""},
		{"clear, bob's box", "DELETE", "/cb/api/schedules/bobs/1", "", alice, 404, "not_found", ""},
		{"clear, not an id", "DELETE", "/cb/api/schedules/main/x", "", alice, 400, "bad_request", ""},
		{"usage, signed out", "GET", "/cb/api/usage", "", nobody, 401, "signed_out", ""},
		{"usage, gw down", "GET", "/cb/api/usage", "", alice, 503, "unavailable", ""},
	}
	checkRefusals(t, cases, "")
}

// refusal is a console call and the refusal it must answer: status, the
// machine code in "error", the field's name ("" for none).
type refusal struct {
	name, method, path, body string
	as                       *apitest.Browser
	status                   int
	code, field              string
}

// checkRefusals sends each case as its browser, a body as JSON and none
// with bare's content type, and checks its status, code and field, and
// that its "message" is a plain sentence.
func checkRefusals(t *testing.T, cases []refusal, bare string) {
	t.Helper()
	for _, c := range cases {
		ctype := bare
		if c.body != "" {
			ctype = "application/json"
		}
		resp, body := c.as.Send(c.method, c.path, ctype, c.body)
		var got struct{ Error, Field, Message string }
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != c.status {
			t.Errorf("%s: %s %s answered %d %s; want %d JSON", c.name, c.method, c.path, resp.StatusCode, body, c.status)
			continue
		}
		if got.Error != c.code || got.Field != c.field {
			t.Errorf("%s: error %q, field %q; want %q, %q", c.name, got.Error, got.Field, c.code, c.field)
		}
		if got.Message == "" || codeLike.MatchString(got.Message) {
			t.Errorf("%s: message %q is not a plain sentence (answer %s)", c.name, got.Message, body)
		}
		t.Logf("%s: %s", c.name, got.Message)
	}
}
