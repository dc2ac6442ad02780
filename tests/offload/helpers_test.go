//go:build booted

// Package offload holds the booted-box tests of the box side of an
// offload (issue 12; Contract: Offload): the image's inbox unit, socket
// and tmpfs, begin's preflight with the real claude and codex CLIs, a
// whole round with the stand-in CLI (./standin), crashes and reboots.
package offload

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/tests/box"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

// The helpers the offload box tests share (tests/offload/offloadbox).
var (
	installStandin = offloadbox.InstallStandin
	boot           = offloadbox.Boot
	waitInbox      = offloadbox.WaitInbox
	verb           = offloadbox.Verb
	mustVerb       = offloadbox.MustVerb
	status         = offloadbox.Status
	messages       = offloadbox.Messages
)

const userSystemctl = offloadbox.UserSystemctl

// waitFor waits up to 60 s for cond (box.Eventually).
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	box.Eventually(t, 60*time.Second, what, cond)
}

// The helpers the offload tests share (guest/offload/offloadtest).
var (
	git      = offloadtest.Git
	handover = offloadtest.Handover
	write    = offloadtest.Write
	read     = offloadtest.Read
)

// macRepo makes a host repository with two commits and an uncommitted
// change.
func macRepo(t *testing.T) string {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("target/\n.env\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644)
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two\n"), 0o644)
	git(t, dir, "commit", "-q", "-am", "two")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two, uncommitted\n"), 0o644)
	return dir
}

// macSide does the host packer's half (Contract: Offload, Mac side;
// offloadtest.MacStream) against the box: begin, S, rsync into the box's
// /workspace/<name> over the stand-in remote shell, the bundle, the
// stream, send.
func macSide(t *testing.T, b *box.Box, host, key, name, kind, id string, extra ...[2]string) (map[string]any, int) {
	t.Helper()
	return macSideWith(t, b, host, key, name, kind, id, handover("a box task"), extra...)
}

// macSideWith is macSide with the hand-over ho.
func macSideWith(t *testing.T, b *box.Box, host, key, name, kind, id, ho string, extra ...[2]string) (map[string]any, int) {
	t.Helper()
	resp, code, stderr := verb(t, b, macStream(t, b, host, key, name, kind, id, ho, extra...), "send", "--repo", key, "--kind", kind, "--id", id)
	if code != 0 {
		t.Logf("send exited %d: %v\nstderr: %s", code, resp, stderr)
	}
	return resp, code
}

// macStream is macSideWith up to send: begin, S, the rsync, the bundle;
// it returns send's stream.
func macStream(t *testing.T, b *box.Box, host, key, name, kind, id, ho string, extra ...[2]string) []byte {
	t.Helper()
	begin := mustVerb(t, b, nil, "begin", "--repo", key, "--name", name, "--kind", kind, "--id", id)
	return offloadtest.MacStream(t, host, id, ho, begin, func(args []string) {
		// The receiving rsync runs in the box as user, as through
		// cocoonbox rsh.
		args = append(args, "-z", "-e", offloadbox.NewTransport(t, b).Shell(), host+"/", "box:/workspace/"+name+"/")
		if out, err := exec.Command("rsync", args...).CombinedOutput(); err != nil {
			t.Fatalf("rsync into the box: %v: %s", err, out)
		}
	}, extra...)
}
