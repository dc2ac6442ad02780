package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// vaultKeys is the key vault through the api, after the vault step's own
// records: `cocoonbox keys add` (the value on standard input), then, on a
// box whose image intercepts, its record in /run/silkd.env with the
// placeholder only and the value nowhere in the box; on an older one, the
// api naming the box among those that get no keys. Then rotate and rm.
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
	out, err := keys(value+"\n", "add", "DEMO_API_KEY", "--host", "api.example.com", "--json")
	var k struct{ Placeholder, How string }
	if err == nil {
		err = json.Unmarshal([]byte(out), &k)
	}
	r.check("keys add", err, "DEMO_API_KEY (value on stdin): the box holds %s, sent to api.example.com as %s", k.Placeholder, k.How)
	if err != nil {
		return
	}
	n := 0
	if m := refVersion.FindStringSubmatch(d.image); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n >= interceptFrom {
		record := "DEMO_API_KEY=" + k.Placeholder + ";api.example.com;"
		err := box.Until(20*time.Second, "/run/silkd.env holds "+record, func() (bool, string) {
			data, err := b.ReadFile("/run/silkd.env")
			return err == nil && strings.Contains(string(data), record), firstLine(string(data))
		})
		r.check("keys on the box", err, "/run/silkd.env holds the record with the placeholder")
		all := mustSh(b, "cat /run/silkd.env /run/cocoonbox-vault/* 2>/dev/null; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
		for _, f := range []string{value, base64.StdEncoding.EncodeToString([]byte(value)), hex.EncodeToString([]byte(value))} {
			if strings.Contains(all, f) {
				r.bad("value in the box", "the box's claim env, vault files or environments hold the value")
				break
			}
		}
	} else {
		out, err := keys("", "ls", "--json")
		if err == nil && !strings.Contains(out, `"box": "`+d.name+`"`) {
			err = fmt.Errorf("keys ls --json does not name %s among boxes_without_keys:\n%s", d.name, out)
		}
		data, _ := b.ReadFile("/run/silkd.env")
		if err == nil && strings.Contains(string(data), "DEMO_API_KEY") {
			err = fmt.Errorf("/run/silkd.env of a v%d box holds the key", n)
		}
		r.check("older image", err, "%s runs %s (< v%d, no interception): it gets no keys, and keys ls says so", d.name, d.image, interceptFrom)
	}
	_, err = keys("sk-proj-demo-rotated\n", "rotate", "DEMO_API_KEY")
	r.check("keys rotate", err, "a new value, the same placeholder")
	_, err = keys("", "rm", "DEMO_API_KEY")
	r.check("keys rm", err, "gone from the vault and every box")
}
