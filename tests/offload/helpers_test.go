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

	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
	"github.com/cocoonbox/cocoonbox/internal/offloadtest"
	"github.com/cocoonbox/cocoonbox/tests/box"
	"github.com/cocoonbox/cocoonbox/tests/offloadbox"
)

// The helpers the offload box tests share (tests/offloadbox).
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

// The helpers the offload tests share (internal/offloadtest).
var (
	git      = offloadtest.Git
	tarOf    = offloadtest.TarOf
	handover = offloadtest.Handover
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

// macSide does the host packer's half (Contract: Offload, Mac side)
// against the box: begin, S, rsync into the box's /workspace/<name>
// without .git/objects, the bundle, the stream, send.
func macSide(t *testing.T, b *box.Box, host, key, name, kind, id string, extra ...[2]string) (map[string]any, int) {
	t.Helper()
	mustVerb(t, b, nil, "begin", "--repo", key, "--name", name, "--kind", kind, "--id", id)
	s, err := gitcmd.Snapshot(host, "S", false)
	if err != nil {
		t.Fatal(err)
	}
	git(t, host, "update-ref", "refs/cocoonbox/base/"+id, s)
	// rsync over the stand-in remote shell, as the host does through
	// cocoonbox rsh: the receiving rsync runs in the box as user.
	out, err := exec.Command("rsync", "-az", "--delete", "--exclude=/.git/objects/", "-e", offloadbox.NewTransport(t, b).Shell(),
		host+"/", "box:/workspace/"+name+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("rsync into the box: %v: %s", err, out)
	}
	bundle := filepath.Join(t.TempDir(), "offload.bundle")
	git(t, host, "bundle", "create", bundle, "--all")
	data, _ := os.ReadFile(bundle)
	members := append([][2]string{{"handover.md", handover("a box task")},
		{"env.json", `{"v":1,"tools":{},"package_managers":{},"files":[],"lockfiles":[]}`},
		{"offload.bundle", string(data)}}, extra...)
	resp, code, stderr := verb(t, b, tarOf(t, members...), "send", "--repo", key, "--kind", kind, "--id", id)
	if code != 0 {
		t.Logf("send exited %d: %v\nstderr: %s", code, resp, stderr)
	}
	return resp, code
}
