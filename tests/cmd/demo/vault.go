package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/vault/envfile"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() { register(30, "box API keys (the vault)", vaultStep) }

// vaultStep first shows the claim env the api gave the box at its boot
// (COCOONBOX_VAULT and COCOONBOX_CONNECT, empty: the key vault and Connect
// are not built yet), then plays their part: it writes a claim env with two
// vault keys, a variable-only record, a Connect grant and a bad record,
// then shows what a login shell of user sees, the keys file, and the
// journal's word on the bad record; then removes a key; then adds one
// through the api's key vault (vaultKeys). The wake step shows the api's
// own entries coming back at the wake.
func vaultStep(ctx context.Context, d *demo, r *report) {
	b := d.box
	own, err := b.ReadFile("/run/silkd.env")
	if err == nil && (!strings.Contains(string(own), "COCOONBOX_VAULT=") || !strings.Contains(string(own), "COCOONBOX_CONNECT=")) {
		err = fmt.Errorf("/run/silkd.env holds %q, want the api's COCOONBOX_VAULT and COCOONBOX_CONNECT", own)
	}
	r.check("api's claim env", err, "/run/silkd.env from the api at the boot: %s (no keys in the vault yet; the demo writes records of its own next, then adds one with cocoonbox keys add)",
		strings.Join(strings.Fields(string(own)), " "))
	vaultRecs := "OPENAI_API_KEY=sk-proj-cbv_0123456789abcdef0123456789abcdef;api.openai.com;Authorization:%20Bearer%20{} " +
		"MAPS_KEY=AIza-cbv_fedcba9876543210fedcba9876543210;maps.googleapis.com;?key={} " +
		"LINK_NO_REFRESH=1;; " +
		"X$(touch${IFS}/tmp/canary)=p;;"
	connectRecs := "GITHUB_TOKEN=ghp_cbv_00112233445566778899aabbccddeeff;api.github.com,github.com;Authorization:%20Basic%20{}"
	env := "COCOONBOX_VAULT=" + envfile.Quote(vaultRecs) + "\nCOCOONBOX_CONNECT=" + envfile.Quote(connectRecs) + "\n"
	fmt.Printf("  claim env written to /run/silkd.env:\n%s", indent(env))
	if err := b.WriteFile("/run/silkd.env", []byte(env), 0o644, "root"); err != nil {
		r.bad("claim env", "%v", err)
		return
	}
	keys, err := waitVault(b, "keys", "GITHUB_TOKEN")
	r.check("rendered", err, "%s", strings.TrimSpace(mustSh(b, "stat -c '%n %U %a' /run/cocoonbox-vault /run/cocoonbox-vault/* | sed 's|/run/cocoonbox-vault/||' | paste -sd ' '")))

	res, _ := b.Exec(box.Cmd{Args: []string{`env | grep -E '^(OPENAI_API_KEY|MAPS_KEY|LINK_NO_REFRESH|GITHUB_TOKEN)=' | sort`}, User: "user", Login: true})
	fmt.Printf("  a login shell of user (runuser -l user) sees:\n%s", indent(res.Stdout))
	for _, want := range []string{"OPENAI_API_KEY=sk-proj-cbv_", "MAPS_KEY=AIza-cbv_", "LINK_NO_REFRESH=1", "GITHUB_TOKEN=ghp_cbv_"} {
		if strings.Contains(res.Stdout, want) {
			r.ok("login shell", "%s...", want)
		} else {
			r.bad("login shell", "no %s", want)
		}
	}
	fmt.Printf("  /run/cocoonbox-vault/keys (what the agent lists):\n%s", indent(keys))
	if strings.Contains(keys, "LINK_NO_REFRESH") {
		r.bad("keys", "lists LINK_NO_REFRESH, which has no hosts")
	} else {
		r.ok("keys", "%d keys with hosts; LINK_NO_REFRESH only exported", strings.Count(keys, "\n")-1)
	}
	warn, _ := b.Run("journalctl", "--no-pager", "-o", "cat", "-t", "cocoonbox-vault", "-p", "warning")
	if line := firstLine(warn); strings.Contains(line, "record 4: NAME must be") && strings.Contains(line, "record skipped") {
		r.ok("bad record", "%s", line)
	} else {
		r.bad("bad record", "the hostile record's refusal is not in the journal: %q", line)
	}
	if out, _ := b.Sh("test -e /tmp/canary && echo executed"); strings.TrimSpace(out) != "" {
		r.bad("canary", "/tmp/canary exists: something was executed")
	} else {
		r.ok("canary", "/tmp/canary absent: nothing in the claim env was executed")
	}

	// The api removes the Maps key.
	env = "COCOONBOX_VAULT=" + envfile.Quote(strings.Replace(vaultRecs, "MAPS_KEY=AIza-cbv_fedcba9876543210fedcba9876543210;maps.googleapis.com;?key={} ", "", 1)) +
		"\nCOCOONBOX_CONNECT=" + envfile.Quote(connectRecs) + "\n"
	if err := b.WriteFile("/run/silkd.env", []byte(env), 0o644, "root"); err != nil {
		r.bad("remove a key", "%v", err)
		return
	}
	_, err = waitVault(b, "vault.sh", "unset MAPS_KEY")
	res, _ = b.Exec(box.Cmd{Args: []string{`echo "MAPS_KEY=${MAPS_KEY-<unset>}"`}, User: "user", Login: true})
	r.check("key removed", err, "a new login shell: %s; names: %s", strings.TrimSpace(res.Stdout),
		strings.TrimSpace(strings.ReplaceAll(mustSh(b, "cat /run/cocoonbox-vault/names"), "\n", " ")))
	vaultKeys(ctx, d, r)
}

func waitVault(b *box.Box, file, want string) (string, error) {
	var data []byte
	err := box.Until(20*time.Second, "/run/cocoonbox-vault/"+file+" holds "+want, func() (bool, string) {
		var err error
		data, err = b.ReadFile("/run/cocoonbox-vault/" + file)
		return err == nil && strings.Contains(string(data), want), fmt.Sprintf("%q (%v)", firstLine(string(data)), err)
	})
	return string(data), err
}

func mustSh(b *box.Box, line string) string {
	out, err := b.Sh(line)
	if err != nil {
		return err.Error()
	}
	return out
}

func indent(s string) string {
	var out strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out.WriteString("        " + l + "\n")
	}
	return out.String()
}
