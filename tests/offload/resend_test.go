//go:build booted

package offload

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// lossyInbox stands between the box's verbs and its inbox: a socket in the
// box's /tmp that every login shell in the box is pointed at
// (COCOONBOX_OFFLOAD_SOCKET). It passes requests and answers through, but
// once armed it drops the inbox's answer to the next Stop report, as an
// inbox killed between doing a request and answering it would.
type lossyInbox struct {
	inbox string
	mu    sync.Mutex
	armed bool
	stops []string // the request ids of the Stop reports the inbox answered since arm, in order
}

// lossyInboxIn starts the relay for b. It must run before the session
// starts, so the CLI's hooks (run from its login shell) reach it.
func lossyInboxIn(t *testing.T, b *box.Box) *lossyInbox {
	t.Helper()
	const sock = "/tmp/cocoonbox-lossy-inbox.sock"
	ln, err := net.Listen("unix", b.Root()+sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// The verbs run as user.
	if err := os.Chmod(b.Root()+sock, 0o666); err != nil {
		t.Fatal(err)
	}
	b.MustSh(t, "echo 'export COCOONBOX_OFFLOAD_SOCKET="+sock+"' >/etc/profile.d/zz-lossy-inbox.sh")
	l := &lossyInbox{inbox: b.Root() + "/run/cocoonbox/offload.sock"}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go l.relay(c)
		}
	}()
	return l
}

func (l *lossyInbox) relay(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return
	}
	up, err := net.Dial("unix", l.inbox)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := up.Write(line); err != nil {
		return
	}
	var req offload.Request
	if json.Unmarshal(line, &req) == nil && req.Op == "event" && req.Hook == "Stop" {
		answer, err := bufio.NewReader(up).ReadBytes('\n')
		if err != nil {
			return
		}
		l.mu.Lock()
		l.stops = append(l.stops, req.RequestID)
		drop := l.armed
		l.armed = false
		l.mu.Unlock()
		if !drop {
			c.Write(answer)
		}
		return
	}
	go func() {
		io.Copy(up, rd)
		up.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(c, up)
}

func (l *lossyInbox) arm() { l.mu.Lock(); l.armed, l.stops = true, nil; l.mu.Unlock() }

func (l *lossyInbox) stopIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.stops...)
}

// The event verb sends a hook's report again when it gets no answer
// (a434dad), so the inbox can get one report twice: here the answer to a
// held turn's Stop is lost after the inbox took it. That Stop delivered
// the first queued message (which holds the CLI again); the resent one
// must not deliver the second into the busy CLI. It stays queued for the
// next idle and reaches the CLI once, after the first.
func TestHookReportDeliveredTwiceIsAppliedOnce(t *testing.T) {
	t.Parallel()
	b := boot(t, box.Options{})
	relay := lossyInboxIn(t, b)
	installStandin(t, b)
	if _, code := macSide(t, b, macRepo(t), "twice", "proj", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	waitFor(t, "idle", func() (bool, string) { s := status(t, b, "twice"); return s == "idle", s })
	holding := func() int {
		out, _ := b.Sh("cat /home/user/.standin/claude-events.jsonl 2>/dev/null")
		return strings.Count(out, `"holding"`)
	}
	mustVerb(t, b, []byte("standin: hold"), "send", "--repo", "twice", "--message")
	waitFor(t, "the CLI holding its turn", func() (bool, string) { n := holding(); return n == 1, fmt.Sprint(n) })
	for _, m := range []string{"first queued\nstandin: hold", "second queued"} {
		if r := mustVerb(t, b, []byte(m), "send", "--repo", "twice", "--message"); r["delivery"] != "queued" {
			t.Fatalf("%q to a busy session: %v", m, r)
		}
	}
	relay.arm()
	release := func() { b.MustSh(t, "runuser -u user -- touch /home/user/.standin/release") }
	release()
	waitFor(t, "the held turn's Stop report and its resend", func() (bool, string) {
		ids := relay.stopIDs()
		return len(ids) >= 2, fmt.Sprint(ids)
	})
	if ids := relay.stopIDs(); ids[0] == "" || ids[1] != ids[0] {
		t.Errorf("the resent report's request ids %q: want one id, sent twice", ids)
	}
	waitFor(t, "the first queued message holding the CLI", func() (bool, string) { n := holding(); return n == 2, fmt.Sprint(n) })
	store := offload.Store{Paths: offload.Paths{State: b.Root() + "/home/user/.local/share/cocoonbox/offload"}}
	msgs, err := store.Messages("twice")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, m := range msgs {
		states = append(states, fmt.Sprintf("%.13q=%s", m.Body, m.State))
	}
	if last := msgs[len(msgs)-1]; last.Body != "second queued" || last.State != offload.MsgQueued {
		t.Fatalf("messages after the resent Stop: %s; want the second queued message still queued", strings.Join(states, ", "))
	}
	if s := status(t, b, "twice"); s != "working" {
		t.Errorf("while the first queued message holds the CLI: %s, want working", s)
	}
	release()
	waitFor(t, "the second queued message at the CLI", func() (bool, string) {
		ms := messages(t, b, "claude")
		return len(ms) > 0 && ms[len(ms)-1] == "second queued", fmt.Sprint(len(ms), " messages")
	})
	ms := messages(t, b, "claude")
	if n := len(ms); n < 3 || ms[n-3] != "standin: hold" || ms[n-2] != "first queued\nstandin: hold" {
		t.Errorf("the CLI's messages end %q; want the hold, the first queued, the second queued, each once", ms[max(0, n-3):])
	}
	waitFor(t, "idle", func() (bool, string) { s := status(t, b, "twice"); return s == "idle", s })
}
