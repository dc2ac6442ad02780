package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// interceptFrom is the first image version whose boxes get the key vault's
// keys (api/boxes.DefaultInterceptFrom).
const interceptFrom = 23

var refVersion = regexp.MustCompile(`:v([0-9]+)-`)

// vaultKeys is the key vault through the api: `cocoonbox keys add` (the
// value on standard input), then, on a box whose image intercepts, curl in
// the box reaches the key's host (the demo's upstream) with the value
// swapped in while the box holds only the placeholder (useKey), and
// `keys rotate` and `keys rm` change what the upstream sees at once; on
// an older one, the api naming the box among those that get no keys.
func vaultKeys(ctx context.Context, d *demo, r *report) {
	b := d.box
	value := "sk-proj-demo" + rand.Text()
	keys := func(stdin string, args ...string) (string, error) {
		out, err := d.cli.Run(ctx, stdin, append(append([]string{"keys"}, args...), "--endpoint", d.api.URL)...)
		if err != nil {
			return out, fmt.Errorf("cocoonbox keys %s: %w: %s", args[0], err, out)
		}
		return out, nil
	}
	out, err := keys(value+"\n", "add", "DEMO_API_KEY", "--host", keyHost, "--json")
	var k struct{ Placeholder, How string }
	if err == nil {
		err = json.Unmarshal([]byte(out), &k)
	}
	r.check("keys add", err, "DEMO_API_KEY (value on stdin): the box holds %s, sent to %s as %s", k.Placeholder, keyHost, k.How)
	if err != nil {
		return
	}
	n := 0
	if m := refVersion.FindStringSubmatch(d.image); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n < interceptFrom {
		out, err := keys("", "ls", "--json")
		if err == nil && !strings.Contains(out, `"box": "`+d.name+`"`) {
			err = fmt.Errorf("keys ls --json does not name %s among boxes_without_keys:\n%s", d.name, out)
		}
		data, _ := b.ReadFile("/run/silkd.env")
		if err == nil && strings.Contains(string(data), "DEMO_API_KEY") {
			err = fmt.Errorf("/run/silkd.env of a v%d box holds the key", n)
		}
		r.check("older image", err, "%s runs %s (< v%d, no interception): it gets no keys, and keys ls says so", d.name, d.image, interceptFrom)
		_, err = keys("sk-proj-demo-rotated\n", "rotate", "DEMO_API_KEY")
		r.check("keys rotate", err, "a new value, the same placeholder")
		_, err = keys("", "rm", "DEMO_API_KEY")
		r.check("keys rm", err, "gone from the vault and every box")
		return
	}
	// A second key for the same host keeps the box's CONNECTs to it going
	// to the demo's upstream after DEMO_API_KEY's rm (resolve applies
	// only to a host a key of the box lists): the removed placeholder then
	// reaches the upstream as it is, and nothing is asked of the world.
	_, err = keys("demo-query-"+rand.Text()+"\n", "add", "DEMO_QUERY_KEY", "--host", keyHost, "--query", "key")
	r.check("keys add", err, "DEMO_QUERY_KEY for %s too (?key={}), kept until the end", keyHost)
	record := "DEMO_API_KEY=" + k.Placeholder + ";" + keyHost + ";"
	err = box.Until(20*time.Second, "/run/silkd.env holds "+record, func() (bool, string) {
		data, err := b.ReadFile("/run/silkd.env")
		return err == nil && strings.Contains(string(data), record), firstLine(string(data))
	})
	r.check("keys on the box", err, "/run/silkd.env holds the record with the placeholder")
	if err != nil {
		return
	}
	keysFile, _ := waitVault(b, "keys", "DEMO_API_KEY")
	env, _ := b.Exec(box.Cmd{Args: []string{"env | grep -E '^(DEMO_API_KEY|HTTPS_PROXY|SSL_CERT_FILE|CURL_CA_BUNDLE)=' | sort"}, User: "user", Login: true})
	r.info("login shell", "user's env: %s; /run/cocoonbox-vault/keys: %s", strings.Join(strings.Fields(env.Stdout), " "), strings.Join(strings.Fields(keysFile), " "))
	if !strings.Contains(env.Stdout, "DEMO_API_KEY="+k.Placeholder+"\n") {
		r.bad("login shell", "user's login shell has no DEMO_API_KEY=%s", k.Placeholder)
	}
	useKey(d, r, "curl", "Bearer "+value, 10*time.Second)
	noValue(d, r, value, k.Placeholder)

	rotated := "sk-proj-demo-rotated" + rand.Text()
	_, err = keys(rotated+"\n", "rotate", "DEMO_API_KEY")
	r.check("keys rotate", err, "a new value, the same placeholder")
	useKey(d, r, "rotated", "Bearer "+rotated, 10*time.Second)
	noValue(d, r, rotated, k.Placeholder)

	_, err = keys("", "rm", "DEMO_API_KEY")
	r.check("keys rm", err, "gone from the vault and every box")
	useKey(d, r, "removed", "Bearer "+k.Placeholder, 10*time.Second)
	err = box.Until(20*time.Second, "/run/silkd.env without DEMO_API_KEY", func() (bool, string) {
		data, err := b.ReadFile("/run/silkd.env")
		return err == nil && !strings.Contains(string(data), "DEMO_API_KEY"), firstLine(string(data))
	})
	if err == nil {
		_, err = waitVault(b, "vault.sh", "unset DEMO_API_KEY")
	}
	res, _ := b.Exec(box.Cmd{Args: []string{`echo "DEMO_API_KEY=${DEMO_API_KEY-<unset>}"`}, User: "user", Login: true})
	if err == nil && !strings.Contains(res.Stdout, "DEMO_API_KEY=<unset>") {
		err = fmt.Errorf("a new login shell after keys rm: %q", res.Stdout)
	}
	r.check("record removed", err, "/run/silkd.env has no DEMO_API_KEY; a new login shell: %s", strings.TrimSpace(res.Stdout))
	_, err = keys("", "rm", "DEMO_QUERY_KEY")
	r.check("keys rm", err, "DEMO_QUERY_KEY too: the vault is empty")
}

// useKey runs curl in a login shell of user (HTTPS_PROXY and
// CURL_CA_BUNDLE from the supervisor's egress environment) against the
// key's host, sending the placeholder as the key's template has it, until
// the upstream sees want in Authorization, within: a key's add, rotation
// or removal is a push the proxy takes when it lands.
func useKey(d *demo, r *report, what, want string, within time.Duration) {
	var got, out string
	start := time.Now()
	try := func() (bool, string) {
		before, _ := d.upstream.requests()
		line := fmt.Sprintf(`curl -sS --fail-with-body -H "Authorization: Bearer $DEMO_API_KEY" %s`, d.upstream.url("/v1/models"))
		if what == "removed" {
			// The new login shell has no DEMO_API_KEY: the box's
			// program still sends the placeholder it was given.
			line = strings.Replace(line, "$DEMO_API_KEY", strings.TrimPrefix(want, "Bearer "), 1)
		}
		res, err := d.box.Exec(box.Cmd{Args: []string{line}, User: "user", Login: true})
		out = strings.TrimSpace(res.Stdout + res.Stderr)
		var n int
		n, got = d.upstream.requests()
		if err != nil || res.ExitCode != 0 || n == before {
			got = ""
			return false, fmt.Sprintf("curl: exit %d %v %q; the upstream got no request", res.ExitCode, err, out)
		}
		if got == want && what != "removed" && strings.Contains(out, strings.TrimPrefix(want, "Bearer ")) {
			return false, fmt.Sprintf("the value came back into the box in the upstream's echo: %q", redact(out))
		}
		return got == want, fmt.Sprintf("the upstream saw Authorization %q", redact(got))
	}
	err := box.Until(within, "the upstream sees "+redact(want), try)
	r.check(what, err, "in the box `curl %s -H 'Authorization: Bearer <the placeholder>'` reached the demo's upstream, which saw Authorization %q (%.2f s after the call) and echoed it; curl printed %q (the placeholder: the proxy swaps the value back in answers)",
		d.upstream.url("/v1/models"), redact(want), time.Since(start).Seconds(), out)
}

// redact shows a header's first 27 characters: enough to tell the real
// value, the rotated one and the placeholder apart in the report.
func redact(s string) string {
	if len(s) > 27 {
		return s[:27] + "…"
	}
	return s
}

// noValue looks for the value (and its base64 and hex forms) everywhere the
// box could hold it: user's login environment, /run/silkd.env, the vault's
// files, every process's environment, and from the host the box's whole
// disk (its overlay root under the supervisor's state directory); the
// placeholder must be in the first three.
func noValue(d *demo, r *report, value, placeholder string) {
	b := d.box
	forms := []string{value, base64.StdEncoding.EncodeToString([]byte(value)), hex.EncodeToString([]byte(value))}
	where := map[string]string{
		"env":                  "env",
		"/run/silkd.env":       "sudo -n cat /run/silkd.env",
		"/run/cocoonbox-vault": "cat /run/cocoonbox-vault/*",
		"/proc/*/environ":      "sudo -n sh -c 'cat /proc/[0-9]*/environ 2>/dev/null' | tr '\\0' '\\n'",
	}
	for _, name := range []string{"env", "/run/silkd.env", "/run/cocoonbox-vault", "/proc/*/environ"} {
		res, err := b.Exec(box.Cmd{Args: []string{where[name]}, User: "user", Login: true})
		switch {
		case err != nil || res.ExitCode != 0 && name != "/proc/*/environ":
			r.bad("no value", "%s: exit %d %v %s", name, res.ExitCode, err, res.Stderr)
		case containsAny(res.Stdout, forms):
			r.bad("no value", "%s holds the value", name)
		case name != "/proc/*/environ" && !strings.Contains(res.Stdout, placeholder):
			r.bad("no value", "%s has no placeholder %s", name, placeholder)
		default:
			r.ok("no value", "%s: the placeholder only (%d bytes read)", name, len(res.Stdout))
		}
	}
	roots, _ := filepath.Glob(filepath.Join(d.machines, "machines", "*", "root"))
	if len(roots) == 0 {
		r.bad("no value", "no box disk under %s/machines/*/root", d.machines)
		return
	}
	for _, root := range roots {
		args := []string{"-rlF", "--devices=skip"}
		for _, f := range forms {
			args = append(args, "-e", f)
		}
		start := time.Now()
		var stderr strings.Builder
		cmd := exec.Command("grep", append(args, root)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		switch {
		case err == nil:
			r.bad("no value", "the box's disk holds the value: %s", strings.Join(strings.Fields(string(out)), " "))
		case errors.As(err, &ee) && ee.ExitCode() == 1:
			r.ok("no value", "grep -r of the box's whole disk %s (from the host): nothing, %.1f s", root, time.Since(start).Seconds())
		default:
			r.bad("no value", "grep -r %s: %v: %s", root, err, firstLine(stderr.String()))
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
