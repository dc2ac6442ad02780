//go:build booted

package vault_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/vault/envfile"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// churnScript runs in the box: a writer renames N claim envs into place as
// fast as it can; each generation i has k = 3 + i%5 records V1..Vk, all
// with placeholder g<i> and hosts, and COUNT=c<k>. A reader loop meanwhile
// enters /run/cocoonbox-vault, sources vault.sh and reads keys through that
// directory, and says whether what it saw is one whole render: every Vj of
// one generation, the rest unset, and keys of the same render id.
const churnScript = `
set -u
N=$1
write() {
	i=$1; k=$(( $2 ))
	recs=""
	for j in $(seq 1 $k); do recs="$recs V$j=g$i;h$j.example;X-K:%20{}"; done
	printf 'COCOONBOX_VAULT="%s COUNT=c%s;;"\n' "$recs" "$k" >/run/.churn.tmp
	mv -f /run/.churn.tmp /run/silkd.env
}
# Generation 0 has all seven names, so names lists them all from the start.
write 0 7
until grep -q "V7='g0'" /run/cocoonbox-vault/vault.sh 2>/dev/null; do sleep 0.01; done
(
	for i in $(seq 1 $N); do write $i "3 + $i % 5"; done
	until grep -q "V1='g$N'" /run/cocoonbox-vault/vault.sh 2>/dev/null; do sleep 0.01; done
	touch /run/churn.done
) &
while [ ! -e /run/churn.done ]; do
	(
		unset V1 V2 V3 V4 V5 V6 V7 COUNT
		cd /run/cocoonbox-vault 2>/dev/null || { echo retry; exit; }
		. ./vault.sh 2>/dev/null || { echo retry; exit; }
		read -r shid <./vault.sh 2>/dev/null || { echo retry; exit; }
		keys=$(cat ./keys 2>/dev/null) || { echo retry; exit; }
		g=${V1#g}; k=$(( 3 + g % 5 )); [ "$g" = 0 ] && k=7
		[ "${COUNT-}" = "c$k" ] || { echo "mix COUNT=${COUNT-unset} for g$g"; exit; }
		for j in 1 2 3 4 5 6 7; do
			eval "v=\${V$j-unset}"
			if [ $j -le $k ]; then want=g$g; else want=unset; fi
			[ "$v" = "$want" ] || { echo "mix V$j=$v in g$g"; exit; }
		done
		kid=$(printf '%s\n' "$keys" | sed -n '1s/^# cocoonbox vault render \([^:]*\):.*/\1/p')
		[ "$shid" != "${shid#*render $kid:}" ] || { echo "mix keys render $kid, vault.sh $shid"; exit; }
		[ "$(printf '%s\n' "$keys" | grep -c "	g$g	")" = $k ] || { echo "mix keys of another generation than g$g"; exit; }
		echo "ok g$g"
	)
done
wait
rm -f /run/churn.done
`

// Must show: a reader loop sourcing vault.sh while the records churn only
// ever sees whole renders.
func TestAReaderSourcingVaultShWhileRecordsChurnOnlyEverSeesWholeRenders(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	res, err := b.Exec(box.Cmd{Args: []string{"bash", "-c", churnScript, "churn", "100"}, Timeout: 8 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("churn script: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	out := res.Stdout
	oks, retries, gens := 0, 0, map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "ok "):
			oks++
			gens[l[3:]] = true
		case l == "retry":
			retries++
		default:
			t.Errorf("reader saw a mix of renders: %s", l)
		}
	}
	t.Logf("%d whole reads of %d generations, %d reads retried (the directory was replaced under the reader)", oks, len(gens), retries)
	if oks < 20 || len(gens) < 3 {
		t.Errorf("the reader saw %d renders of %d generations: too few to show anything", oks, len(gens))
	}
	if f, _ := b.FailedUnits(); len(f) > 0 {
		t.Errorf("failed units after the churn: %v", f)
	}
}

// The parser reads what systemd 252's EnvironmentFile= reads: the same
// file, given to a transient service of the box's own systemd, yields the
// same variables.
func TestTheClaimEnvParserReadsWhatSystemd252sEnvironmentFileReads(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	file := "T_PLAIN=1\n" +
		"  T_BLANKS  =   x y  \n" +
		"T_SQ='a \"b\" $c \\d'\n" +
		"T_SQNL='x\ny'\n" +
		"T_DQ=\"a \\\"b\\\" \\$c \\\\ \\x \\`\"\n" +
		"T_DQCONT=\"x\\\ny\"\n" +
		"T_CONCAT=\"a\" 'b'  c\n" +
		"T_QUOTEINBARE=a \"b c\"\n" +
		"T_BARE=a\\ b\\\\c\\$d\n" +
		"T_CONT=one \\\ntwo\n" +
		"T_TRAIL=x\\ \n" +
		"# T_COMMENT=1\n" +
		"; T_SEMI=1\n" +
		"# a comment that ends in a backslash \\\n" +
		"T_AFTER_COMMENT=1\n" +
		"T_AFTER=2\n" +
		"T_EMPTY=\n" +
		"T_DUP=1\nT_DUP=2\n" +
		"1T_BAD=1\nT-BAD=1\nT BAD=1\n" +
		"T_CRLF=v\r\n" +
		"T_EVAL=$(touch /tmp/canary) `id` ${HOME}\n" +
		"T_TAB=\ttab\t \n" +
		"T_NOEQUALS\n" +
		"T_VAULT=\"A=a;h.example;Authorization:%20Bearer%20{} L=1;;\"\n" +
		"T_UNTERM='abc\nT_INSIDE=1\n"
	if err := b.WriteFile("/run/t.env", []byte(file), 0o644, "root"); err != nil {
		t.Fatal(err)
	}
	out := b.Must(t, "systemd-run", "--wait", "--pipe", "--quiet", "-p", "EnvironmentFile=/run/t.env", "/usr/bin/env", "-0")
	systemd := map[string]string{}
	for _, kv := range strings.Split(out, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "T") {
			systemd[k] = v
		}
	}
	f, err := envfile.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{}
	for _, e := range f.Entries {
		ours[e.Name] = e.Value
	}
	if !reflect.DeepEqual(ours, systemd) {
		for k := range merge(ours, systemd) {
			if ours[k] != systemd[k] {
				t.Errorf("%s: systemd %s, envfile %s", k, strconv.Quote(systemd[k]), strconv.Quote(ours[k]))
			}
		}
	}
	if len(systemd) < 15 {
		t.Errorf("systemd read only %d T* variables: %v", len(systemd), systemd)
	}
}

func merge(a, b map[string]string) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// Deliver 1: the vault runs on every change of /run/silkd.env: a rename
// into place (the first one too), a write in place, a delete and a new
// file.
func TestEveryChangeOfSilkdEnvIsRenderedIncludingARenameIntoPlace(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	steps := []struct{ how, sh string }{
		{"first file, renamed into place", `printf 'COCOONBOX_VAULT=S=s1;;\n' >/run/.t && mv /run/.t /run/silkd.env`},
		{"renamed over the old one", `printf 'COCOONBOX_VAULT=S=s2;;\n' >/run/.t && mv /run/.t /run/silkd.env`},
		{"written in place", `printf 'COCOONBOX_VAULT=S=s3;;\n' >/run/silkd.env`},
		{"deleted, then written anew", `rm /run/silkd.env && printf 'COCOONBOX_VAULT=S=s4;;\n' >/run/silkd.env`},
		{"hard link renamed into place", `printf 'COCOONBOX_VAULT=S=s5;;\n' >/run/.t && ln /run/.t /run/.t2 && mv /run/.t2 /run/silkd.env && rm /run/.t`},
	}
	for i, s := range steps {
		b.MustSh(t, s.sh)
		want := "S='s" + strconv.Itoa(i+1) + "'"
		t.Logf("%s: waiting for %s", s.how, want)
		waitFor(t, b, "vault.sh", want)
	}
}

// Deliver 1: "and at boot when it is there": a claim env in place before
// systemd starts is rendered at boot, before logins are allowed.
func TestAClaimEnvPresentAtBootIsRenderedBeforeLogins(t *testing.T) {
	t.Parallel()
	env := filepath.Join(t.TempDir(), "silkd.env")
	if err := os.WriteFile(env, []byte("COCOONBOX_VAULT=\"BOOT_KEY=boot-cbv_1;api.example.com;?key={}\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := box.Boot(t, box.Options{Args: []string{"--bind-ro=" + env + ":/run/silkd.env"}})
	waitFor(t, b, "keys", "BOOT_KEY\tboot-cbv_1\tapi.example.com\t?key={}")
	expectEnv(t, loginEnv(t, b, "BOOT_KEY"), "BOOT_KEY=boot-cbv_1")
	// The resident vault says READY=1 after its first render.
	exited, _ := b.Run("systemctl", "show", "-P", "ActiveEnterTimestampMonotonic", "cocoonbox-vault.service")
	sessions, _ := b.Run("systemctl", "show", "-P", "ActiveEnterTimestampMonotonic", "systemd-user-sessions.service")
	e, _ := strconv.ParseInt(strings.TrimSpace(exited), 10, 64)
	s, _ := strconv.ParseInt(strings.TrimSpace(sessions), 10, 64)
	if e == 0 || s == 0 || e > s {
		t.Errorf("the boot render ended at %d µs, logins were allowed at %d µs: want the render first", e, s)
	}
}
