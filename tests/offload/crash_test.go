//go:build booted

package offload

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Offload, Inbox ("a crash at any point never loses an accepted
// message or outbox entry, nor duplicates one"): posts and messages go on
// while the inbox is killed with SIGKILL again and again; every post a
// verb reported accepted is in the outbox once, every message at the CLI
// once, none twice. Then the box reboots:
// the records survive, the session is restarted from its last hand-over,
// and a queued message is delivered to it once.
func TestInboxKilledAndBoxRebootedLosesNothing(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{Persistent: filepath.Join(t.TempDir(), "root")})
	installStandin(t, b)
	if _, code := macSide(t, b, macRepo(t), "crash", "proj", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	waitFor(t, "idle", func() (bool, string) { s := status(t, b, "crash"); return s == "idle", s })

	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]bool{}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				q := fmt.Sprintf("question %d-%d?", w, i)
				if resp, code, _ := verb(t, b, []byte(q), "post", "--question", "--repo", "crash"); code == 0 && resp["ok"] == true {
					mu.Lock()
					accepted[q] = true
					mu.Unlock()
				}
			}
		}(w)
	}
	// Four kills: each restart counts against the unit's start limit (5 in 10 s).
	sent := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 12; i++ {
			m := fmt.Sprintf("message %d", i)
			if resp, code, _ := verb(t, b, []byte(m), "send", "--repo", "crash", "--message"); code == 0 && resp["ok"] == true {
				mu.Lock()
				sent[m] = true
				mu.Unlock()
			}
		}
	}()
	for k := 0; k < 4; k++ {
		b.Sh(userSystemctl + " kill --kill-who=main -s KILL cocoonbox-offload-inbox.service")
		waitInbox(t, b)
	}
	wg.Wait()
	counts := map[string]int{}
	read := mustVerb(t, b, nil, "read", "--repo", "crash")
	for _, e := range read["entries"].([]any) {
		counts[e.(map[string]any)["body"].(string)]++
	}
	for q := range accepted {
		if counts[q] != 1 {
			t.Errorf("accepted %q is in the outbox %d times", q, counts[q])
		}
	}
	for q, n := range counts {
		if n > 1 {
			t.Errorf("%q is in the outbox %d times", q, n)
		}
	}
	if len(accepted) == 0 || len(sent) == 0 {
		t.Fatalf("accepted %d posts and %d messages: the test needs some of each", len(accepted), len(sent))
	}
	// Every accepted message reaches the CLI once (a queued one at its
	// next idle), none twice.
	got := func() map[string]int {
		n := map[string]int{}
		for _, m := range messages(t, b, "claude") {
			n[m]++
		}
		return n
	}
	waitFor(t, "every accepted message at the CLI", func() (bool, string) {
		n := got()
		for m := range sent {
			if n[m] == 0 {
				return false, m + " not yet"
			}
		}
		return true, ""
	})
	for m, c := range got() {
		if c > 1 {
			t.Errorf("%q reached the CLI %d times", m, c)
		}
	}

	// A message queued for a busy session survives the reboot and reaches
	// the restarted session once.
	mustVerb(t, b, []byte("standin: hold"), "send", "--repo", "crash", "--message")
	waitFor(t, "working", func() (bool, string) { s := status(t, b, "crash"); return s == "working", s })
	if r := mustVerb(t, b, []byte("after the reboot"), "send", "--repo", "crash", "--message"); r["delivery"] != "queued" {
		t.Fatalf("not queued: %v", r)
	}
	before := len(mustVerb(t, b, nil, "read", "--repo", "crash")["entries"].([]any))
	if err := b.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitInbox(t, b)
	if after := len(mustVerb(t, b, nil, "read", "--repo", "crash")["entries"].([]any)); after != before {
		t.Errorf("outbox: %d entries before the reboot, %d after", before, after)
	}
	// The restart check started the CLI again (the stand-in's messages
	// file is in the home, which the reboot kept); its first prompt is the
	// restart's, then the queued message, once.
	waitFor(t, "the queued message in the restarted session", func() (bool, string) {
		ms := messages(t, b, "claude")
		n := 0
		for _, m := range ms {
			if m == "after the reboot" {
				n++
			}
		}
		return n == 1, fmt.Sprint(len(ms), " messages, last ", ms[len(ms)-1][:min(40, len(ms[len(ms)-1]))])
	})
	ms := messages(t, b, "claude")
	restarted := false
	for _, m := range ms {
		restarted = restarted || strings.HasPrefix(m, "Your previous session in this box ended")
	}
	if !restarted {
		t.Errorf("no restart prompt among %d messages", len(ms))
	}

	// rescan after the home is replaced (a State.Restore): the records of
	// the new home are loaded.
	// The inbox still writes the session's records (each through a
	// temporary file renamed over it): a plain cp -a of the live directory
	// failed when one of those vanished between its listing and its copy,
	// so the copy leaves them out; every record it takes is whole.
	b.MustSh(t, "rsync -a --exclude='.*.json[0-9]*' --exclude='.new-*' /home/user/.local/share/cocoonbox/offload/ /root/saved-offload/")
	mustVerb(t, b, nil, "end", "--repo", "crash")
	b.MustSh(t, "rm -rf /home/user/.local/share/cocoonbox/offload && cp -a /root/saved-offload /home/user/.local/share/cocoonbox/offload")
	// The agent's rescan, sent as cbagent would, to the socket in the box.
	if _, err := offload.Call(b.Root()+"/run/cocoonbox/offload.sock", &offload.Request{Op: "rescan"}, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// The restored records say the session ran, and its tmux session is
	// gone: the restart check starts it again from its last hand-over.
	waitFor(t, "the restored session running again", func() (bool, string) {
		s := status(t, b, "crash")
		return s == "idle" || s == "working", s
	})
}
