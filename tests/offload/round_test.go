//go:build booted

package offload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

const secret = "aws_secret_access_key = S3CR3T-in-box-never-anywhere"

// Contract: Offload (a whole round in the box): begin, send of a stream
// with a bundle, a hand-over and a secret; the stand-in CLI starts in
// tmux with the first prompt, works, posts progress, a question and back;
// read --since --wait long-polls and returns each once; end stops the CLI
// and wipes the secret. And Contract: Offload, Secrets: the secret never
// appears in argv (/proc/*/cmdline), the journal, a verb's stdout or
// stderr, or anywhere outside the tmpfs.
func TestOffloadRoundInTheBox(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{})
	installStandin(t, b)
	host := macRepo(t)
	send, code := macSide(t, b, host, "round", "proj", "claude", "off1", [2]string{"secrets/aws/credentials", secret})
	if code != 0 || send["delivery"] != "started" || send["accepted"] != true {
		t.Fatalf("send: %d %v", code, send)
	}
	if out := b.MustSh(t, "runuser -u user -- tmux list-sessions -F '#{session_name}'"); !strings.Contains(out, "cb-off-round-claude") {
		t.Errorf("tmux sessions: %q", out)
	}
	waitFor(t, "idle", func() (bool, string) { s := status(t, b, "round"); return s == "idle", s })
	outputs := fmt.Sprint(send)

	// A turn that commits, posts progress and a question; the read
	// long-polls for them and returns each once.
	r := mustVerb(t, b, []byte("standin: commit\nstandin: progress\nstandin: question"), "send", "--repo", "round", "--message")
	outputs += fmt.Sprint(r)
	read := mustVerb(t, b, nil, "read", "--repo", "round", "--since", "0", "--wait", "30")
	es, _ := read["entries"].([]any)
	if len(es) == 0 || es[0].(map[string]any)["kind"] != "progress" {
		t.Fatalf("read: %v", read)
	}
	seen := int64(0)
	kinds := []string{}
	for len(kinds) < 2 {
		read = mustVerb(t, b, nil, "read", "--repo", "round", "--since", fmt.Sprint(seen), "--wait", "30")
		for _, e := range read["entries"].([]any) {
			m := e.(map[string]any)
			seen = int64(m["seq"].(float64))
			kinds = append(kinds, m["kind"].(string))
		}
	}
	if strings.Join(kinds, ",") != "progress,question" {
		t.Errorf("outbox kinds %v, want progress then question, each once", kinds)
	}
	waitFor(t, "blocked on the question", func() (bool, string) { s := status(t, b, "round"); return s == "blocked", s })
	mustVerb(t, b, []byte("standin: back"), "send", "--repo", "round", "--back")
	read = mustVerb(t, b, nil, "read", "--repo", "round", "--since", fmt.Sprint(seen), "--wait", "30")
	if es, _ := read["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["kind"] != "back" {
		t.Fatalf("back: %v", read)
	}
	b.Must(t, "runuser", "-u", "user", "--", "git", "-C", "/workspace/proj", "rev-parse", "--verify", "refs/cocoonbox/back/off1")

	// The secret: only on the tmpfs, never in argv, the journal, or output.
	if got := b.MustSh(t, "cat /run/cocoonbox-offload/secrets/round/aws/credentials"); got != secret {
		t.Errorf("the secret on the tmpfs: %q", got)
	}
	if out, _ := b.Sh("grep -l 'S3CR3[T]' /proc/[0-9]*/cmdline 2>/dev/null"); strings.TrimSpace(out) != "" {
		t.Errorf("the secret is in argv of %s", out)
	}
	if out, _ := b.Sh("journalctl -m --no-pager -o verbose | grep -c 'S3CR3[T]'"); strings.TrimSpace(out) != "0" {
		t.Errorf("the secret is in the journal (%s entries)", strings.TrimSpace(out))
	}
	if out, _ := b.Sh("grep -rl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=cocoonbox-offload 'S3CR3[T]' / 2>/dev/null"); strings.TrimSpace(out) != "" {
		t.Errorf("the secret is on a disk: %s", out)
	}
	end := mustVerb(t, b, nil, "end", "--repo", "round")
	outputs += fmt.Sprint(end)
	if strings.Contains(outputs, "S3CR3T") {
		t.Error("the secret is in a verb's output")
	}
	if ms := messages(t, b, "claude"); ms[len(ms)-1] != "/exit" {
		t.Errorf("end did not type /exit: %q", ms[len(ms)-1])
	}
	if s := status(t, b, "round"); s != "stopped" {
		t.Errorf("after end: %s", s)
	}
	if out, _ := b.Sh("ls /run/cocoonbox-offload/secrets/"); strings.TrimSpace(out) != "" {
		t.Errorf("end left secrets: %q", out)
	}
}
