package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// A vault directory whose parent is missing is a mistake a retry will not
// fix: it exits 73, not 75 (issue 18, item 6: it was 75, so a unit would
// retry it for ever).
func TestDirUnderAMissingParentIsPermanent(t *testing.T) {
	tmp := t.TempDir()
	env := filepath.Join(tmp, "silkd.env")
	if err := os.WriteFile(env, []byte("COCOONBOX_VAULT=\"A=a;;\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := journal.New("cocoonbox-vault-test")
	log.Stderr, log.Echo = io.Discard, nil
	if code := run(log, env, filepath.Join(tmp, "missing", "vault")); code != cli.Unsafe {
		t.Fatalf("render into a missing parent: exit %d, want %d", code, cli.Unsafe)
	}
	// The control: the same file renders into a parent that exists.
	if code := run(log, env, filepath.Join(tmp, "vault")); code != cli.OK {
		t.Fatalf("render into %s: exit %d, want 0", tmp, code)
	}
}
