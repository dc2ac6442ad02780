package console_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// codeLike is what a person should never read in a refusal the console
// shows: a JSON path or index, a CLI flag, an RFC, an api path, a
// snake_case name, a "field: " prefix.
var codeLike = regexp.MustCompile(`\[|--|RFC|/cb/api|[a-z]+_[a-z]+|^[a-z_]+: `)

// Issue 41, Deliver 2: every refusal the Devices, Agents, Account, queue
// and consent pages show is a plain sentence in "message" (what
// console.js's plain shows first), and the machine code stays in "error".
func TestEveryRefusalThePagesShowIsAPlainSentence(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	a.AddUser("boss", true)
	alice, boss, nobody := a.SignIn("alice"), a.SignIn("boss"), a.Browser()
	cases := []struct {
		name, method, path, body string
		as                       interface {
			Send(method, path, ctype, body string) (*http.Response, string)
		}
		status int
		code   string
	}{
		{"devices, signed out", "GET", "/cb/api/devices", "", nobody, 401, "signed_out"},
		{"devices, revoked already", "DELETE", "/cb/api/devices/cbd_00000000000000000000000000000000", "", alice, 404, "not_found"},
		{"agents, signed out", "GET", "/cb/api/agents", "", nobody, 401, "signed_out"},
		{"agents, not an id", "DELETE", "/cb/api/agents/x", "", alice, 400, "bad_request"},
		{"agents, revoked already", "DELETE", "/cb/api/agents/cbg_000000000000000000000000", "", alice, 404, "not_found"},
		{"account, signed out", "GET", "/cb/api/me", "", nobody, 401, "signed_out"},
		{"token, signed out", "POST", "/cb/api/me/token", "{}", nobody, 401, "signed_out"},
		{"delete, another name", "POST", "/cb/api/me/delete", `{"name":"bob"}`, alice, 400, "bad_request"},
		{"delete, an admin", "POST", "/cb/api/me/delete", `{"name":"boss"}`, boss, 403, "admin"},
		{"delete, signed out", "POST", "/cb/api/me/delete", `{"name":"alice"}`, nobody, 401, "signed_out"},
		{"queue, not queued", "GET", "/cb/api/queue/me", "", nobody, 404, "not_queued"},
		{"admin, not an admin", "GET", "/cb/api/queue", "", alice, 403, "not_admin"},
		{"consent, unknown client", "POST", "/cb/api/oauth/check", `{"query":"client_id=nobody&response_type=code"}`, alice, 400, "invalid_request"},
		{"consent, no client", "POST", "/cb/api/oauth/check", `{"query":"response_type=code"}`, alice, 400, "invalid_request"},
	}
	for _, c := range cases {
		ctype := ""
		if c.body != "" {
			ctype = "application/json"
		}
		resp, body := c.as.Send(c.method, c.path, ctype, c.body)
		var got struct{ Error, Message string }
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != c.status {
			t.Errorf("%s: %s %s answered %d %s; want %d JSON", c.name, c.method, c.path, resp.StatusCode, body, c.status)
			continue
		}
		if c.code != "" && got.Error != c.code && c.status != 400 {
			t.Errorf("%s: error %q; want the machine code %q", c.name, got.Error, c.code)
		}
		if got.Message == "" || codeLike.MatchString(got.Message) {
			t.Errorf("%s: message %q is not a plain sentence (answer %s)", c.name, got.Message, body)
		}
	}
}
