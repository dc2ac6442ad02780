package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
)

// keyValue is the value the keys tests store; every answer, page and log
// line is grepped for it.
const keyValue = "sk-ant-E2EVALUE-0123456789abcdefghij"

// assertNoKeyValue fails when s holds v as is, in base64 or in hex.
func assertNoKeyValue(t *testing.T, what, s, v string) {
	t.Helper()
	for _, f := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v))} {
		if strings.Contains(s, f) {
			t.Errorf("%s holds the key's value (as %q):\n%s", what, f, s)
		}
	}
}

// TestKeysThroughTheCLIAndTheConsole drives the vault as a user does: the
// CLI (the value on stdin, never argv) and the console's JSON calls, and
// greps every answer, the page, the api's log and the audit rows for the
// value.
func TestKeysThroughTheCLIAndTheConsole(t *testing.T) {
	e := newEnv(t)
	c := e.console("alice")
	cli := harness.CLI{Bin: bins.CLI, ConfigDir: t.TempDir(), Env: []string{"COCOONBOX_TOKEN=" + e.device(c, "laptop"), "COCOONBOX_ENDPOINT=" + e.api.URL}}
	var seen []string
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, err := cli.Run(e.ctx, stdin, args...)
		if err != nil {
			t.Fatalf("cocoonbox %v: %v\n%s", args, err, out)
		}
		seen = append(seen, out)
		return out
	}
	out := run(keyValue+"\n", "keys", "add", "ANTHROPIC_API_KEY", "--host", "api.anthropic.com", "--header", "x-api-key", "--json")
	var k struct{ Name, How, Placeholder string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.How != "X-Api-Key: {}" || !regexp.MustCompile(`^sk-ant-cbv_[0-9a-f]{32}$`).MatchString(k.Placeholder) {
		t.Fatalf("keys add --json: %q (%v)", out, err)
	}
	run("ghp_second\n", "keys", "add", "GITHUB_TOKEN", "--host", "api.github.com", "--host", "uploads.github.com")
	if out := run("", "keys", "ls"); !strings.Contains(out, "GITHUB_TOKEN") || !strings.Contains(out, k.Placeholder) {
		t.Fatalf("keys ls:\n%s", out)
	}
	run("sk-ant-rotated\n", "keys", "rotate", "ANTHROPIC_API_KEY", "--json")
	var ls struct {
		Keys []struct {
			Name, Placeholder string
			Rotated           *string
		}
	}
	if out := run("", "keys", "ls", "--json"); json.Unmarshal([]byte(out), &ls) != nil || len(ls.Keys) != 2 || ls.Keys[0].Placeholder != k.Placeholder || ls.Keys[0].Rotated == nil {
		t.Fatalf("keys ls --json after a rotation (the placeholder must stay):\n%s", out)
	}

	// Refused: a value on argv, before anything is sent; the api's rules.
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"keys", "add", "K", "--host", "a.com", "--value", keyValue}, "never given on the command line"},
		{"", []string{"keys", "add", "K", "--host", "a.com", "--value=" + keyValue}, "never given on the command line"},
		{"", []string{"keys", "add", "K", keyValue, "--host", "a.com"}, "never given on the command line"},
		{"", []string{"keys", "rotate", "GITHUB_TOKEN", keyValue}, "never given on the command line"},
		{"v\n", []string{"keys", "add", "K", "--host", "https://a.com"}, "has a scheme"},
		{"v\n", []string{"keys", "add", "GITHUB_TOKEN", "--host", "a.com"}, "exists"},
		{"v\n", []string{"keys", "add", "K"}, "--host none"},
		{"a\nb\n", []string{"keys", "add", "K", "--host", "a.com"}, "holds a newline"},
		{"v\n", []string{"keys", "rm", "NOPE"}, "no such key"},
	} {
		out, err := cli.Run(e.ctx, tc.stdin, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("cocoonbox %v: %v, %q; want a failure saying %q", tc.args, err, out, tc.want)
		}
		seen = append(seen, out)
	}

	// The console's calls.
	do := func(method, path string, body any, want int) string {
		t.Helper()
		status, out, err := c.Do(e.ctx, method, path, body)
		if err != nil || status != want {
			t.Fatalf("%s %s: %d %v %s; want %d", method, path, status, err, out, want)
		}
		seen = append(seen, out)
		return out
	}
	do("POST", "/cb/api/keys", map[string]any{"name": "GEMINI", "hosts": []string{"generativelanguage.googleapis.com"}, "query": "key", "value": "AIza" + keyValue}, http.StatusCreated)
	do("POST", "/cb/api/keys", map[string]any{"name": "BAD", "hosts": []string{"a.com"}, "template": "{} {}", "value": keyValue}, http.StatusBadRequest)
	do("PUT", "/cb/api/keys/GEMINI", map[string]any{"value": keyValue + "2"}, http.StatusOK)
	do("PUT", "/cb/api/keys/NOPE", map[string]any{"value": keyValue}, http.StatusNotFound)
	if out := do("GET", "/cb/api/keys", nil, http.StatusOK); !strings.Contains(out, `"placeholder":"AIzacbv_`) || !strings.Contains(out, `"how":"?key={}"`) {
		t.Fatalf("GET /cb/api/keys: %s", out)
	}
	do("DELETE", "/cb/api/keys/GEMINI", nil, http.StatusNoContent)
	do("DELETE", "/cb/api/keys/GEMINI", nil, http.StatusNotFound)
	do("GET", "/cb/keys", nil, http.StatusOK)
	// JSON only: a form of another page cannot add a key.
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.api.URL+"/cb/api/keys", bytes.NewReader([]byte("name=X&value=v")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := c.Client.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a form POST: %v %v", resp, err)
	}
	run("", "keys", "rm", "ANTHROPIC_API_KEY", "--json")

	var audit bytes.Buffer
	rows, err := e.db.Pool.Query(e.ctx, "SELECT a::text, name || ':' || action || ':' || actor FROM vault_audit a ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for rows.Next() {
		var s, a string
		rows.Scan(&s, &a)
		audit.WriteString(s + "\n")
		actions = append(actions, a)
	}
	want := "ANTHROPIC_API_KEY:create:cli GITHUB_TOKEN:create:cli ANTHROPIC_API_KEY:rotate:cli GEMINI:create:console GEMINI:rotate:console GEMINI:delete:console ANTHROPIC_API_KEY:delete:cli"
	if strings.Join(actions, " ") != want {
		t.Errorf("audit rows %q, want %q", actions, want)
	}
	everything := strings.Join(seen, "\n") + audit.String() + e.api.Log()
	for _, v := range []string{keyValue, "sk-ant-rotated", "ghp_second", "AIza" + keyValue} {
		assertNoKeyValue(t, "the answers, audit rows and the api's log", everything, v)
	}
}
