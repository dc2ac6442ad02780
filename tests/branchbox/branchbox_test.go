//go:build booted

// Package branchbox boots the image and runs BranchBox in it as the
// orchestrator would (Contract: BranchBox managed runtime manifest): the
// image's /usr/local/bin/branchbox, its git, its users (root as the
// runtime, user, uid 1000, as the workspace consumer), its journal.
package branchbox

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

const run = "/run/branchbox/managed/run-demo"

// layOut makes the run directory, a repository snapshot and the
// assignment in the box: the example, less its tool-endpoint and
// tool-request leases (no socket server in the base image), with the
// provider "cat", the consumer user (1000:1000) and root-owned places
// (/workspace is user's, so it cannot be a workspace's ancestor).
func layOut(t *testing.T, b *box.Box) {
	t.Helper()
	base := b.MustSh(t, `set -e
install -d -m 0755 /run/branchbox /run/branchbox/managed /srv/branchbox /srv/branchbox/repos /srv/branchbox/workspaces
install -d -m 0700 `+run+` `+run+`/materializations `+run+`/shared
install -d -m 0755 `+run+`/shared/exchange
printf example-delivery-token >`+run+`/materializations/delivery-token
chmod 0600 `+run+`/materializations/delivery-token
git init -q -b main /srv/branchbox/repos/app
echo app >/srv/branchbox/repos/app/README
git -C /srv/branchbox/repos/app add README
git -C /srv/branchbox/repos/app -c user.name=o -c user.email=o@example.invalid commit -qm snapshot
git -C /srv/branchbox/repos/app rev-parse HEAD`)
	m := branchboxtest.Example(t)
	m["leases"] = m["leases"].([]any)[:3]
	m["leases"].([]any)[0].(map[string]any)["executable"] = "cat"
	m["repository"] = map[string]any{"path": "/srv/branchbox/repos/app", "base": strings.TrimSpace(base)}
	m["workspace"] = map[string]any{"path": "/srv/branchbox/workspaces/coding-demo", "consumer_uid": 1000, "consumer_gid": 1000}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(run+"/assignment.json", data, 0o600, "root"); err != nil {
		t.Fatal(err)
	}
}

func branchbox(t *testing.T, b *box.Box, args ...string) box.Result {
	t.Helper()
	res, err := b.Exec(box.Cmd{Args: append([]string{"branchbox", "feature", args[0], "coding-demo", "--run", "run-demo"}, args[1:]...)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// One managed run's whole life in a booted box: check, materialize (the
// delegation as the image's user), exec (the provider's environ), teardown
// (--force required, the receipt), the journal's story.
func TestManagedRunInTheImage(t *testing.T) {
	b := box.Boot(t, box.Options{})
	if link := strings.TrimSpace(b.Must(t, "readlink", "/usr/local/bin/branchbox")); link != "/usr/local/lib/cocoonbox/branchbox" {
		t.Fatalf("/usr/local/bin/branchbox links to %q", link)
	}
	layOut(t, b)

	res := branchbox(t, b, "check", "--json")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, `"status": "valid"`) {
		t.Fatalf("check: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res = branchbox(t, b, "materialize"); res.ExitCode != 0 {
		t.Fatalf("materialize: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Contract: Version 3 workspace delegation, as the image's user.
	ws := "/srv/branchbox/workspaces/coding-demo"
	modes := b.MustSh(t, `runuser -u user -- sh -c 'umask 022; cd `+ws+` && mkdir open && chmod 0755 open && echo x >open/new && stat -c "%a %U:%G" open/new README'`)
	if modes != "660 user:user\n660 root:user\n" {
		t.Fatalf("new files in the delegated workspace: %q, want 660 with user's group", modes)
	}
	commit := `cd ` + ws + ` && echo more >>README && git -c safe.directory='*' -c user.name=u -c user.email=u@example.invalid commit -qam 'by user'`
	if out, err := b.Exec(box.Cmd{Args: []string{"sh", "-c", commit}, User: "user"}); err != nil || out.ExitCode != 0 {
		t.Fatalf("the consumer cannot commit: %v %s%s", err, out.Stdout, out.Stderr)
	}

	// Contract: "Provider execution starts from an empty process environment".
	res, err := b.Exec(box.Cmd{Args: []string{"env", "-i", "MODEL_ACCESS_TOKEN=tok", "CALLER_ONLY=leak",
		"/usr/local/bin/branchbox", "feature", "exec", "coding-demo", "--run", "run-demo", "--consumer", "coding-agent",
		"--executable", "cat", "--inherit", "MODEL_ACCESS_TOKEN", "--", "/proc/self/environ"}})
	want := "PATH=/usr/local/bin:/usr/bin:/bin\x00MODEL_ACCESS_TOKEN=tok\x00SOURCE_DELIVERY_TOKEN=example-delivery-token\x00"
	if err != nil || res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("exec: %v exit %d: %q %s", err, res.ExitCode, res.Stdout, res.Stderr)
	}

	// Contract: "managed in-guest teardown requires --force".
	if res = branchbox(t, b, "teardown"); res.ExitCode != 65 {
		t.Fatalf("teardown without --force: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res = branchbox(t, b, "teardown", "--force", "--json"); res.ExitCode != 0 || !strings.Contains(res.Stdout, `"residue_free": true`) {
		t.Fatalf("teardown: exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	b.MustSh(t, `test ! -e `+ws+` && test ! -e `+run+` && test -s /run/branchbox/receipts/run-demo.json`)

	// The journal tells the run's story (journald may take a moment).
	deadline := time.Now().Add(20 * time.Second)
	var story string
	for time.Now().Before(deadline) {
		story, _ = b.Run("journalctl", "-t", "branchbox", "-o", "cat", "--no-pager")
		if strings.Contains(story, "teardown coding-demo: ") {
			break
		}
		b.Run("journalctl", "--flush")
	}
	for _, line := range []string{"check coding-demo: valid", "materialized coding-demo", "exec cat for coding-agent", "teardown coding-demo refused", "teardown coding-demo: "} {
		if !strings.Contains(story, line) {
			t.Errorf("journalctl -t branchbox lacks %q:\n%s", line, story)
		}
	}
	// journalctl -x explains them: the catalog is in the image's database.
	if c := b.Must(t, "journalctl", "--list-catalog", "c41d8e2a7b5f4a93b06e1d9c2a8f7e30"); !strings.Contains(c, "BranchBox teardown left residue") {
		t.Errorf("the catalog lacks branchbox's residue entry: %q", c)
	}
}
