package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// Issue 45, Deliver 3: a command given --json prints one JSON object on
// stdout when it fails too, {"error": {"code", "message"}}, so a script
// reading stdout sees why.
func TestJSONFailureIsOneObjectOnStdout(t *testing.T) {
	t.Setenv("COCOONBOX_TOKEN", "cb_"+strings.Repeat("0", 64))
	for _, c := range []struct {
		args []string
		code string
		want string
	}{
		{[]string{"boxes", "--json"}, "unavailable", "cannot reach the api at http://127.0.0.1:1"},
		{[]string{"box", "status", "--json"}, "unavailable", "cannot reach the api"},
		{[]string{"box", "create", "Bad_Name", "--json"}, "usage", `NAME "Bad_Name" must be`},
		{[]string{"box", "delete", "web", "--json"}, "usage", "needs --confirm"},
	} {
		out, err := runCLI(t, "", append(c.args, "--endpoint", "http://127.0.0.1:1")...)
		if err == nil {
			t.Fatalf("cocoonbox %v: no error", c.args)
		}
		var got struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		if derr := dec.Decode(&got); derr != nil || dec.More() || got.Error.Code != c.code || !strings.Contains(got.Error.Message, c.want) {
			t.Errorf("cocoonbox %v: stdout %q (%v), want one object with code %q and a message with %q", c.args, out, derr, c.code, c.want)
		}
	}
}
