//go:build booted

package vault_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// msgRendered is the vault's MESSAGE_ID of a render put in place.
const msgRendered = "b2089241d49f460bbbd6c6b20ee456f4"

// Contract: Journal, Box API keys. The vault runs from boot, before the api
// writes the identity, and across clones; each render's entry names the box
// of that render, read then (issue 18, item 7: it named the box of the
// vault's start, or none), and journalctl -x explains it from the catalog.
func TestVaultEntriesNameTheBoxOfEachRender(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	n := 0
	render := func(value, wantBox string) {
		t.Helper()
		claimEnv(t, b, "A="+value+";;", "")
		waitFor(t, b, "vault.sh", "export A='"+value+"'")
		entries := b.WaitJournal(t, 10*time.Second, n, msgRendered)
		n = len(entries)
		if got := entries[n-1]["COCOONBOX_BOX_ID"]; got != wantBox {
			t.Errorf("render of %s: COCOONBOX_BOX_ID=%q, want %q", value, got, wantBox)
		}
	}
	render("before-identity", "")
	must(t, b.WriteIdentity(box.NewIdentity("cb-first01", "first")))
	render("after-identity", "cb-first01")
	must(t, b.WriteIdentity(box.NewIdentity("cb-clone02", "clone")))
	render("after-clone", "cb-clone02")

	out := b.Must(t, "journalctl", "-m", "-x", "--no-pager", "MESSAGE_ID="+msgRendered)
	if !strings.Contains(out, "Box API keys rendered") {
		t.Errorf("journalctl -x does not explain the render entry from the catalog:\n%s", out)
	}
}

// Run by hand in a terminal, the vault shows its refusals there as well as
// in the journal; run by systemd or a script (no terminal), the journal
// alone has them (issue 18, item 6: it was silent in a terminal).
func TestVaultRefusalsReachATerminal(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	b.MustSh(t, `printf 'COCOONBOX_VAULT="PATH=p;; OK=o;;"\n' >/run/t.env`)
	vault := "/usr/local/lib/cocoonbox/vault --env /run/t.env --dir /tmp/v"
	out := b.MustSh(t, "script -qec '"+vault+"' /dev/null")
	if !strings.Contains(out, "reserved") || !strings.Contains(out, "warning:") {
		t.Errorf("in a terminal the vault did not show the refused record: %q", out)
	}
	res, err := b.Exec(box.Cmd{Args: strings.Fields(vault)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("vault without a terminal: exit %d, %v: %s", res.ExitCode, err, res.Stderr)
	}
	if res.Stderr != "" {
		t.Errorf("without a terminal the vault wrote to stderr: %q", res.Stderr)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
