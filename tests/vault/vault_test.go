//go:build booted

// Package vault_test checks, in booted boxes, the promises of the contract
// section "Box API keys" (issue 4): the claim env /run/silkd.env rendered
// into /run/cocoonbox-vault, and what login shells see of it.
package vault_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/vault/envfile"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

const (
	envPath  = "/run/silkd.env"
	vaultDir = "/run/cocoonbox-vault"
	// msgRecordSkipped is the vault's MESSAGE_ID for a refused record.
	msgRecordSkipped = "7f2f1796cc574af8ab8b944881feaee6"
	msgBadEnvFile    = "f7f04645966241808ea1d1fa65c9a541"
)

// claimEnv writes a claim env file the way sandboxd's guest side would:
// NAME="value" lines, renamed into place.
func claimEnv(t testing.TB, b *box.Box, vaultRecords, connectRecords string, extra ...string) {
	t.Helper()
	var s strings.Builder
	s.WriteString("# written by the test, as sandboxd's guest side would\n")
	s.WriteString("COCOONBOX_VAULT=" + envfile.Quote(vaultRecords) + "\n")
	if connectRecords != "" {
		s.WriteString("COCOONBOX_CONNECT=" + envfile.Quote(connectRecords) + "\n")
	}
	for _, e := range extra {
		s.WriteString(e + "\n")
	}
	if err := b.WriteFile(envPath, []byte(s.String()), 0o644, "root"); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until the vault file holds want, and the service is done.
func waitFor(t testing.TB, b *box.Box, file, want string) string {
	t.Helper()
	var last string
	box.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s holding %q", vaultDir, file, want), func() (bool, string) {
		data, err := b.ReadFile(vaultDir + "/" + file)
		last = string(data)
		if err != nil || !strings.Contains(last, want) {
			return false, last
		}
		state, _ := b.Run("systemctl", "show", "-P", "ActiveState", "cocoonbox-vault.service")
		return strings.TrimSpace(state) != "activating", "the service " + strings.TrimSpace(state)
	})
	return last
}

// loginEnv runs a login shell of user (runuser -l user) and returns what it
// prints for each name: "NAME=value" or "NAME unset".
func loginEnv(t testing.TB, b *box.Box, names ...string) map[string]string {
	t.Helper()
	var script strings.Builder
	for _, n := range names {
		fmt.Fprintf(&script, `if [ -n "${%[1]s+set}" ]; then printf '%%s\n' "%[1]s=$%[1]s"; else echo "%[1]s unset"; fi; `, n)
	}
	res, err := b.Exec(box.Cmd{Args: []string{script.String()}, User: "user", Login: true})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("login shell of user: %v %d %s", err, res.ExitCode, res.Stderr)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if n, _, ok := strings.Cut(l, "="); ok {
			got[n] = l
		} else if n, ok := strings.CutSuffix(l, " unset"); ok {
			got[n] = l
		}
	}
	return got
}

func expectEnv(t testing.TB, got map[string]string, want ...string) {
	t.Helper()
	for _, w := range want {
		n, _, ok := strings.Cut(w, "=")
		if !ok {
			n, _ = strings.CutSuffix(w, " unset")
		}
		if got[n] != w {
			t.Errorf("login shell of user: got %q, want %q", got[n], w)
		}
	}
}

func journal(t testing.TB, b *box.Box, messageID string) string {
	t.Helper()
	out, err := b.Run("journalctl", "--no-pager", "-o", "cat", "-t", "cocoonbox-vault", "MESSAGE_ID="+messageID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Must show: two COCOONBOX_VAULT records and one COCOONBOX_CONNECT record:
// a login shell of user sees each placeholder; keys lists only records with
// hosts; LINK_NO_REFRESH=1;; is exported and absent from keys; %20, %3B and
// %25 in how decode right.
func TestTwoVaultRecordsAndOneConnectRecordReachUsersLoginShellAndKeys(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	claimEnv(t, b,
		"OPENAI_API_KEY=sk-proj-cbv_0123456789abcdef0123456789abcdef;api.openai.com;Authorization:%20Bearer%20{} LINK_NO_REFRESH=1;;",
		"ODD_KEY=odd-cbv_fedcba9876543210fedcba9876543210;odd.example.com,api.odd.example.com;X-Odd:%20a%3Bb%25c%20{}")
	keys := waitFor(t, b, "keys", "ODD_KEY")

	expectEnv(t, loginEnv(t, b, "OPENAI_API_KEY", "LINK_NO_REFRESH", "ODD_KEY"),
		"OPENAI_API_KEY=sk-proj-cbv_0123456789abcdef0123456789abcdef",
		"LINK_NO_REFRESH=1",
		"ODD_KEY=odd-cbv_fedcba9876543210fedcba9876543210")

	lines := strings.Split(strings.TrimSuffix(keys, "\n"), "\n")
	want := []string{
		"OPENAI_API_KEY\tsk-proj-cbv_0123456789abcdef0123456789abcdef\tapi.openai.com\tAuthorization: Bearer {}",
		"ODD_KEY\todd-cbv_fedcba9876543210fedcba9876543210\todd.example.com,api.odd.example.com\tX-Odd: a;b%c {}",
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "# cocoonbox vault render ") || lines[1] != want[0] || lines[2] != want[1] {
		t.Errorf("keys:\n%s\nwant a comment line, then:\n%s", keys, strings.Join(want, "\n"))
	}
	if strings.Contains(keys, "LINK_NO_REFRESH") {
		t.Errorf("keys lists LINK_NO_REFRESH, a record without hosts:\n%s", keys)
	}
	// Contract: root, 0755; files 0644.
	modes := b.MustSh(t, "stat -c '%n %U %a %F' "+vaultDir+" "+vaultDir+"/*")
	for _, l := range strings.Split(strings.TrimSpace(modes), "\n") {
		f := strings.Fields(l)
		want := "644"
		if f[0] == vaultDir {
			want = "755"
		}
		if f[1] != "root" || f[2] != want {
			t.Errorf("%s: owner %s mode %s, want root %s", f[0], f[1], f[2], want)
		}
	}
}

// Must show: a record removed: a new login shell has the name unset; names
// still lists it.
func TestARemovedRecordIsUnsetInANewLoginShellAndNamesStillListsIt(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	claimEnv(t, b, "GITHUB_TOKEN=ghp_cbv_00112233445566778899aabbccddeeff;api.github.com;Authorization:%20Bearer%20{} KEEP=k;;", "")
	waitFor(t, b, "vault.sh", "GITHUB_TOKEN")
	expectEnv(t, loginEnv(t, b, "GITHUB_TOKEN", "KEEP"), "GITHUB_TOKEN=ghp_cbv_00112233445566778899aabbccddeeff", "KEEP=k")

	claimEnv(t, b, "KEEP=k2;;", "")
	sh := waitFor(t, b, "vault.sh", "KEEP='k2'")
	if !strings.Contains(sh, "\nunset GITHUB_TOKEN\n") {
		t.Errorf("vault.sh does not unset GITHUB_TOKEN:\n%s", sh)
	}
	expectEnv(t, loginEnv(t, b, "GITHUB_TOKEN", "KEEP"), "GITHUB_TOKEN unset", "KEEP=k2")
	names, _ := b.ReadFile(vaultDir + "/names")
	if string(names) != "GITHUB_TOKEN\nKEEP\n" {
		t.Errorf("names = %q, want GITHUB_TOKEN and KEEP", names)
	}
	if _, err := b.ReadFile(vaultDir + "/keys"); err == nil {
		t.Error("keys is there though no record has hosts any more")
	}
}

// vaultLine is every line vault.sh may hold.
var vaultLine = regexp.MustCompile(`^(# cocoonbox vault render [^\n]*|export [A-Za-z_][A-Za-z0-9_]*='[A-Za-z0-9_-]+'|unset [A-Za-z_][A-Za-z0-9_]*)$`)

// Must show: hostile records behave as documented and nothing in the file
// is ever executed (canary files): a NAME like X$(touch /tmp/canary), a
// placeholder with a quote, a newline inside a value, a 1 MiB record, a
// NAME with -, 10,000 records.
func TestHostileRecordsBehaveAsDocumentedAndNothingIsExecuted(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	canaries := []string{"/tmp/canary", "/run/canary", "/home/user/canary"}
	var many strings.Builder
	for i := 1; i <= 10000; i++ {
		fmt.Fprintf(&many, "MANY_%d=m%d;; ", i, i)
	}
	// Records are separated by spaces, so "X$(touch /tmp/canary)=p;;" is
	// two records, "X$(touch" and "/tmp/canary)=p;;": both refused.
	vaultRecords := strings.Join([]string{
		"X$(touch /tmp/canary)=p;;",                                   // 1, 2: no '=', NAME rule
		"QUOTE=p'$(touch${IFS}/run/canary)';;",                        // 3: placeholder rule
		"NL=a\ntouch${IFS}/home/user/canary;;",                        // 4: a newline inside a value
		"BIG=" + strings.Repeat("b", 1<<20) + ";;",                    // 5: 1 MiB record
		"my-key=k-cbv_1;api.example.com;Authorization:%20Bearer%20{}", // 6: NAME with '-', hosts: keys only
		"my-flag=1;;",             // 7: NAME with '-', no hosts: refused
		"`touch /tmp/canary`=p;;", // 8, 9: no '=', NAME rule
		"GOOD=good-cbv_1;;",       // 10
	}, " ")
	claimEnv(t, b, vaultRecords, many.String(),
		// Outside the two entries too: nothing in the file is evaluated.
		`EVIL=$(touch /tmp/canary)`, "EVIL2=`touch /run/canary`",
		`COCOONBOX_UNRELATED="$(touch /tmp/canary)"`)
	sh := waitFor(t, b, "vault.sh", "export GOOD='good-cbv_1'")

	got := loginEnv(t, b, "GOOD", "QUOTE", "NL", "BIG", "MANY_1", "MANY_10000", "EVIL")
	expectEnv(t, got, "GOOD=good-cbv_1", "QUOTE unset", "NL unset", "BIG unset", "MANY_1=m1", "MANY_10000=m10000", "EVIL unset")
	// bash runs a login shell of user once more, interactively, to give
	// PROMPT_COMMAND and the like a chance to run anything.
	b.Exec(box.Cmd{Args: []string{"runuser", "-l", "user", "-c", "bash -il </dev/null"}})
	b.Exec(box.Cmd{Args: []string{"sh", "-c", ". /run/cocoonbox-vault/vault.sh"}})
	for _, c := range canaries {
		if out, err := b.Sh("test -e " + c + " && echo present || true"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("canary %s: %q %v: something in the claim env was executed", c, out, err)
		}
	}

	lines := strings.Split(strings.TrimSuffix(sh, "\n"), "\n")
	for _, l := range lines {
		if !vaultLine.MatchString(l) {
			t.Errorf("vault.sh holds a line of another shape: %q", l)
			break
		}
	}
	if n := strings.Count(sh, "\nexport MANY_"); n != 10000 {
		t.Errorf("vault.sh exports %d of the 10,000 records", n)
	}
	if strings.Contains(sh, "my-key") || strings.Contains(sh, "my-flag") {
		t.Errorf("vault.sh exports a NAME with '-'")
	}
	keys, _ := b.ReadFile(vaultDir + "/keys")
	if string(keys[strings.IndexByte(string(keys), '\n')+1:]) != "my-key\tk-cbv_1\tapi.example.com\tAuthorization: Bearer {}\n" {
		t.Errorf("keys:\n%s\nwant the my-key record only", keys)
	}

	skipped := journal(t, b, msgRecordSkipped)
	for _, want := range []string{
		"COCOONBOX_VAULT record 1: no '=' after NAME",
		"COCOONBOX_VAULT record 2: NAME must be [A-Za-z0-9_-]+",
		"COCOONBOX_VAULT record 3: placeholder must be [A-Za-z0-9_-]+",
		"COCOONBOX_VAULT record 4: record has byte 0x0a at offset 4",
		"COCOONBOX_VAULT record 5: record is 1048582 bytes, longer than 4096",
		"COCOONBOX_VAULT record 7: NAME my-flag is not a shell variable name and the record has no hosts",
		"COCOONBOX_VAULT record 8: no '=' after NAME",
		"COCOONBOX_VAULT record 9: NAME must be",
	} {
		if !strings.Contains(skipped, want) {
			t.Errorf("the journal does not say %q; it says:\n%s", want, skipped)
		}
	}
	warned := journal(t, b, "25a8738ef5574bddb481060141d797e5")
	if !strings.Contains(warned, "COCOONBOX_VAULT record 6: NAME my-key is not a shell variable name: listed in keys, not exported") {
		t.Errorf("no warning for my-key: %q", warned)
	}
}

// Deliver 5: an unreadable or unparsable silkd.env keeps the last good
// render and logs why.
func TestABadClaimEnvKeepsTheLastGoodRenderAndLogsWhy(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	claimEnv(t, b, "FIRST=one;;", "")
	before := waitFor(t, b, "vault.sh", "FIRST='one'")

	bad := []byte("COCOONBOX_VAULT=\"FIRST=two;;\"\nBROKEN=\xff\xfe\n")
	if err := b.WriteFile(envPath, bad, 0o644, "root"); err != nil {
		t.Fatal(err)
	}
	box.Eventually(t, 20*time.Second, "a journal entry saying why the file was refused", func() (bool, string) {
		got := journal(t, b, msgBadEnvFile)
		return strings.Contains(got, "line 2: the value of BROKEN is not valid UTF-8"), got
	})
	if after, _ := b.ReadFile(vaultDir + "/vault.sh"); string(after) != before {
		t.Errorf("vault.sh changed after a bad claim env:\n%s", after)
	}
	expectEnv(t, loginEnv(t, b, "FIRST"), "FIRST=one")

	// A symlink in place of the file is refused, not followed.
	b.MustSh(t, "echo 'COCOONBOX_VAULT=FIRST=three;;' >/root/elsewhere && ln -sfn /root/elsewhere /run/.l && mv -T /run/.l "+envPath)
	box.Eventually(t, 20*time.Second, "a journal entry refusing the symlink", func() (bool, string) {
		got := journal(t, b, msgBadEnvFile)
		return strings.Contains(got, "is a symlink"), got
	})
	if after, _ := b.ReadFile(vaultDir + "/vault.sh"); string(after) != before {
		t.Errorf("vault.sh changed after a symlinked claim env:\n%s", after)
	}
	// The next good file, renamed over the symlink, renders again.
	claimEnv(t, b, "FIRST=four;;", "")
	waitFor(t, b, "vault.sh", "FIRST='four'")
}
