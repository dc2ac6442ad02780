package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

// countingAPI is an endpoint that counts the requests it gets and
// refuses each as the api refuses bad input (a connect INVALID_ARGUMENT,
// which the CLI does not retry): a check made before any call leaves it
// at 0.
func countingAPI(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"code":"invalid_argument","message":"the test api refuses every call"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// Issue 45, Deliver 2: every argument with a grammar the api checks is
// checked by the CLI first, with api/client's rule (the api's too), so a
// bad one sends no request and its refusal names the input, the flag and
// the rule: device ids, images, a schedule's NAME, cron expression, time
// zone, keep-up and id, and a key's NAME, hosts, header, template and
// query parameter.
func TestEveryArgumentWithAGrammarIsCheckedBeforeAnyRequest(t *testing.T) {
	endpoint, requests := countingAPI(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	const cron7 = "0 7 * * *"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"devices", "revoke", "dev_XYZ"}, `devices revoke: ID "dev_XYZ" must be dev_ and 16 hex digits`},
		{[]string{"box", "create", "demo", "--image", "cbdesk:latest"}, `--image "cbdesk:latest" must be cbdesk:vN-TIER`},
		{[]string{"box", "schedule", "Bad_Name", "--cron", cron7}, `NAME "Bad_Name" must be 1 to 63 of [a-z0-9-]`},
		{[]string{"box", "schedule", "main", "--cron", "every morning"}, `--cron "every morning" is not five fields (minute hour day-of-month month day-of-week`},
		{[]string{"box", "schedule", "main", "--cron", "61 * * * *"}, `--cron "61 * * * *" is not five fields`},
		{[]string{"box", "schedule", "main", "--cron", cron7, "--tz", "Mars/Olympus"}, `--tz "Mars/Olympus" is not an IANA time zone, such as Europe/Berlin`},
		{[]string{"box", "schedule", "main", "--cron", cron7, "--tz", "Local"}, `--tz "Local" is not an IANA time zone`},
		{[]string{"box", "schedule", "main", "--cron", cron7, "--keep-up", "200h"}, `--keep-up 200h0m0s is not 0 to 168h0m0s`},
		{[]string{"box", "schedule", "main", "--clear", "--id", "-1"}, `--id -1 is not a schedule's id`},
		{[]string{"keys", "add", "bad name!", "--host", "api.openai.com"}, `keys add: NAME "bad name!" must be 1 to 64 of A-Za-z0-9_-`},
		{[]string{"keys", "rotate", "bad!"}, `keys rotate: NAME "bad!" must be`},
		{[]string{"keys", "rm", strings.Repeat("K", 65)}, `keys rm: NAME "KKKK`},
		{[]string{"keys", "add", "K"}, `keys add K: --host none: name at least one host`},
		{[]string{"keys", "add", "K", "--host", "https://api.openai.com"}, `--host "https://api.openai.com" has a scheme`},
		{[]string{"keys", "add", "K", "--host", "api.openai.com:443"}, `--host "api.openai.com:443" has a port`},
		{[]string{"keys", "add", "K", "--host", "a_b.com"}, `--host "a_b.com" is not a DNS host name: labels of A-Za-z0-9-`},
		{[]string{"keys", "add", "K", "--host", "a.com", "--host", "A.com"}, `--host "a.com" is given twice`},
		{[]string{"keys", "add", "K", "--host", "a.com", "--header", "Bad Header"}, `--header "Bad Header" is not an HTTP header name`},
		{[]string{"keys", "add", "K", "--host", "a.com", "--header", "host"}, `--header Host frames or routes the request`},
		{[]string{"keys", "add", "K", "--host", "a.com", "--template", "Token"}, `--template "Token" holds {} 0 times`},
		{[]string{"keys", "add", "K", "--host", "a.com", "--query", "a;b"}, `--query "a;b" holds ';'`},
		{[]string{"keys", "add", "K", "--host", "a.com", "--query", "key", "--header", "X-Key"}, `--query a key is sent in a query parameter or in a header, not both`},
		{[]string{"rsh", "--box", "Bad_Name", "--", "true"}, `rsh: the box "Bad_Name" must be 1 to 63 of [a-z0-9-]`},
		{[]string{"rsh", "bad.host", "true"}, `rsh: the box "bad.host" must be`},
		{[]string{"screen", "Bad_Name"}, `screen: NAME "Bad_Name" must be`},
		{[]string{"offload", "--box", "Bad_Name"}, `offload: --box "Bad_Name" must be`},
	} {
		args := append(c.args, "--endpoint", endpoint)
		if c.args[0] == "rsh" || c.args[0] == "screen" {
			// Their flags come before the box and the command.
			args = append([]string{c.args[0], "--endpoint", endpoint}, c.args[1:]...)
		}
		_, err := runCLI(t, "the-value", args...)
		var ue command.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cocoonbox %.80q: %v, want a usage error with %q", c.args, err, c.want)
		}
		if n := requests.Load(); n != 0 {
			t.Fatalf("cocoonbox %.80q sent %d requests before its refusal", c.args, n)
		}
	}
	// A value with a control byte is refused as the api would, unsent.
	_, err := runCLI(t, "a\x01b", "keys", "add", "K", "--host", "a.com", "--endpoint", endpoint)
	if err == nil || !strings.Contains(err.Error(), "keys add K: the value holds control byte 0x01 at byte 1") || requests.Load() != 0 {
		t.Errorf("a value with a control byte: %v, %d requests", err, requests.Load())
	}
	// The control: well-formed arguments do reach the api.
	for _, args := range [][]string{{"devices", "revoke", "dev_0123456789abcdef"}, {"box", "schedule", "main", "--cron", cron7, "--tz", "Europe/Berlin", "--keep-up", "2h"},
		{"keys", "add", "K", "--host", "api.openai.com", "--header", "X-Api-Key"}, {"box", "create", "demo", "--image", "cbdesk:v23-desk"}} {
		before := requests.Load()
		runCLI(t, "the-value", append(args, "--endpoint", endpoint)...)
		if requests.Load() == before {
			t.Errorf("cocoonbox %q sent no request: the counter cannot see one", args)
		}
	}
}
