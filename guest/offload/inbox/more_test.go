package inbox_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Contract: Offload, Box CLI in tmux: codex's command line, notify as the
// turn's end (idle), and /quit at end.
func TestOffloadRoundCodex(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("cx")
	send, code := e.macSide(host, "k2", "cx", "codex", "off1")
	if code != 0 || send["accepted"] != true {
		t.Fatalf("send: %d %v", code, send)
	}
	var argv []string
	e.waitFor("the stand-in's argv", func() (bool, string) {
		json.Unmarshal([]byte(e.standin("codex", "argv.json")), &argv)
		return len(argv) == 5, e.standin("codex", "argv.json")
	})
	argv[0] = filepath.Base(argv[0])
	want := []string{"codex", "--dangerously-bypass-approvals-and-sandbox", "-c",
		`notify=["` + filepath.Join(e.bin, "cocoonbox-agent") + `","offload","event","--repo","k2","--cli","codex","--hook","notify"]`}
	if !reflect.DeepEqual(argv[:4], want) {
		t.Errorf("argv %q, want %q", argv[:4], want)
	}
	e.waitFor("idle after notify", func() (bool, string) { s := e.status("k2"); return s == "idle", s })
	cfg, _ := os.ReadFile(filepath.Join(e.home, ".codex/config.toml"))
	if !strings.Contains(string(cfg), `[projects."`+e.paths.Copy("cx")+`"]`) {
		t.Errorf("no trust preset for codex:\n%s", cfg)
	}
	e.mustVerb(nil, "end", "--repo", "k2")
	if m := e.messages("codex"); m[len(m)-1] != "/quit" {
		t.Errorf("end typed %q, want /quit", m[len(m)-1])
	}
}

// Contract: Offload, send steps: a bundle whose prerequisite the copy
// lacks fails clearly, the copy's refs untouched, the copy released.
func TestBundleWithAMissingPrerequisiteFails(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("pre")
	begin := e.mustVerb(nil, "begin", "--repo", "k3", "--name", "pre", "--kind", "claude", "--id", "off1")
	copyDir := begin["dir"].(string)
	// A copy with only the first commit, and a bundle of the second that
	// names the first as its prerequisite; then the copy loses the first.
	git(t, copyDir, "init", "-q")
	first := git(t, host, "rev-parse", "HEAD^")
	git(t, host, "bundle", "create", filepath.Join(e.dir, "b"), "HEAD", "--not", first)
	bundle, _ := os.ReadFile(filepath.Join(e.dir, "b"))
	git(t, copyDir, "commit", "-q", "--allow-empty", "-m", "unrelated")
	before := git(t, copyDir, "for-each-ref")
	resp, code, _ := e.verb(tarOf(t, [2]string{"handover.md", Handover("x")}, [2]string{"offload.bundle", string(bundle)}), "send", "--repo", "k3", "--kind", "claude", "--id", "off1")
	if code != 1 || resp["code"] != "failed" || !strings.Contains(fmt.Sprint(resp["error"]), first) || !strings.Contains(fmt.Sprint(resp["error"]), "lacks") {
		t.Fatalf("send: %d %v", code, resp)
	}
	if after := git(t, copyDir, "for-each-ref"); after != before {
		t.Errorf("refs changed:\n%s\n->\n%s", before, after)
	}
	// Released: another offload id may take the copy now.
	e.mustVerb(nil, "begin", "--repo", "k3", "--name", "pre", "--kind", "claude", "--id", "off2")
}

// An empty history sends no bundle and works.
func TestEmptyHistorySendsNoBundle(t *testing.T) {
	e := newEnv(t)
	host := filepath.Join(e.dir, "mac/empty")
	os.MkdirAll(host, 0o755)
	git(t, host, "init", "-q")
	os.WriteFile(filepath.Join(host, "notes.txt"), []byte("untracked\n"), 0o644)
	begin := e.mustVerb(nil, "begin", "--repo", "k4", "--name", "empty", "--kind", "claude", "--id", "off1")
	copyDir := begin["dir"].(string)
	os.MkdirAll(filepath.Join(copyDir, ".git"), 0o755)
	for _, f := range []string{"HEAD", "config"} {
		data, _ := os.ReadFile(filepath.Join(host, ".git", f))
		os.WriteFile(filepath.Join(copyDir, ".git", f), data, 0o644)
	}
	os.WriteFile(filepath.Join(copyDir, "notes.txt"), []byte("untracked\n"), 0o644)
	resp, code, stderr := e.verb(tarOf(t, [2]string{"handover.md", Handover("empty")}), "send", "--repo", "k4", "--kind", "claude", "--id", "off1")
	if code != 0 || resp["accepted"] != true {
		t.Fatalf("send of an empty history: %d %v %s", code, resp, stderr)
	}
}

// Bad input: a stream member outside the table is refused with the
// contract's error shape, and nothing of the stream stays.
func TestBadStreamIsRefusedAndRolledBack(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("bad")
	e.mustVerb(nil, "begin", "--repo", "k5", "--name", "bad", "--kind", "claude", "--id", "off1")
	_ = host
	resp, code, _ := e.verb(tarOf(t, [2]string{"secrets/aws/credentials", secretValue}, [2]string{"etc/passwd", "x"}), "send", "--repo", "k5", "--kind", "claude", "--id", "off1")
	if code != 1 || resp["code"] != "failed" || !strings.Contains(fmt.Sprint(resp["error"]), `"etc/passwd"`) {
		t.Fatalf("send: %d %v", code, resp)
	}
	if strings.Contains(fmt.Sprint(resp), "s3cr3t") {
		t.Error("the secret is in the verb's answer")
	}
	if _, err := os.Stat(filepath.Join(e.paths.Secrets, "k5")); !os.IsNotExist(err) {
		t.Errorf("the rolled-back send left its secrets: %v", err)
	}
	if left, _ := os.ReadDir(filepath.Join(e.paths.State, "k5/stage")); len(left) != 0 {
		t.Errorf("stage/ not emptied: %v", left)
	}
}

// Contract: Offload, post: --progress and --back refuse a body missing a
// heading, naming the missing headings; nothing is posted.
func TestPostRefusesAHandoverMissingAHeading(t *testing.T) {
	e := newEnv(t)
	body := strings.Replace(Handover("x"), "## Gotchas learned\n", "", 1)
	for _, kind := range []string{"--progress", "--back"} {
		resp, code, _ := e.verb([]byte(body), "post", kind, "--repo", "k6")
		if code != 3 || resp["code"] != "refused" || !strings.Contains(fmt.Sprint(resp["error"]), "## Gotchas learned") {
			t.Errorf("post %s: %d %v", kind, code, resp)
		}
	}
	read := e.mustVerb(nil, "read", "--repo", "k6")
	if es, _ := read["entries"].([]any); len(es) != 0 {
		t.Errorf("something was posted: %v", es)
	}
}

// Bad input to the inbox: a line that is not JSON, an unknown op, a 10
// MiB line: each answered {"ok":false,"code":"invalid","error"}, and the
// connection still serves the next request.
func TestInboxRefusesBadRequests(t *testing.T) {
	e := newEnv(t)
	conn, err := net.Dial("unix", e.paths.Socket)
	must(t, err)
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for _, line := range []string{"hello", `{"op":"fly"}`, `{"op":"read","repo":"k","body":"` + strings.Repeat("x", 10<<20) + `"}`, `{"op":"status"}`} {
		go conn.Write([]byte(line + "\n"))
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		answer, err := rd.ReadString('\n')
		must(t, err)
		var resp map[string]any
		must(t, json.Unmarshal([]byte(answer), &resp))
		if line == `{"op":"status"}` {
			if resp["ok"] != true {
				t.Errorf("status after the bad lines: %v", resp)
			}
			continue
		}
		if resp["ok"] != false || resp["code"] != "invalid" || resp["error"] == "" {
			t.Errorf("%.30s: %v", line, resp)
		}
	}
}

// A verb with the inbox down is inbox, exit 4.
func TestVerbWithTheInboxDown(t *testing.T) {
	e := newEnv(t)
	e.kill()
	resp, code, _ := e.verb(nil, "read", "--repo", "k7")
	if code != 4 || resp["code"] != "inbox" {
		t.Fatalf("read with no inbox: %d %v", code, resp)
	}
}

// read --wait long-polls: it returns as soon as a post lands, with that
// entry once; a read after it returns nothing new. The post waits until
// the inbox says the read is parked (a sleep let a late read pass
// without a long poll).
func TestReadWaitReturnsEachEntryOnce(t *testing.T) {
	e := newEnv(t)
	got := make(chan map[string]any, 1)
	go func() {
		resp, _, _ := e.verb(nil, "read", "--repo", "k8", "--since", "0", "--wait", "20")
		got <- resp
	}()
	e.waitParked(1) // the post must land while the read waits, or the long poll goes untested
	e.mustVerb([]byte("Is this a question?"), "post", "--question", "--repo", "k8")
	resp := <-got
	es, _ := resp["entries"].([]any)
	if len(es) != 1 || es[0].(map[string]any)["body"] != "Is this a question?" {
		t.Fatalf("long-poll: %v", resp)
	}
	again := e.mustVerb(nil, "read", "--repo", "k8", "--since", "1")
	if es, _ := again["entries"].([]any); len(es) != 0 {
		t.Fatalf("entry returned twice: %v", again)
	}
}

// Contract: Offload, Inbox: watch is a line per change, never a body; an
// outbox entry carries its kind and seq.
func TestWatchFeedsEntriesWithoutBodies(t *testing.T) {
	e := newEnv(t)
	conn, err := net.Dial("unix", e.paths.Socket)
	must(t, err)
	defer conn.Close()
	conn.Write([]byte(`{"op":"watch"}` + "\n"))
	// The watch is registered once the inbox has read the line; a status
	// round trip on another connection after it cannot overtake it.
	e.waitFor("the watch to be registered", func() (bool, string) {
		e.mustVerb([]byte("Ping?"), "post", "--question", "--repo", "w1")
		conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return false, err.Error()
		}
		var ev map[string]any
		json.Unmarshal([]byte(line), &ev)
		if ev["repo"] != "w1" || ev["entry"] != "question" || ev["seq"] == nil || strings.Contains(line, "Ping?") {
			t.Fatalf("watch line %q", line)
		}
		return true, line
	})
}

// Bad input: a hook payload that is not JSON is a usage error with the
// contract's shape, and the status does not move.
func TestEventWithAPayloadThatIsNotJSON(t *testing.T) {
	e := newEnv(t)
	resp, code, _ := e.verb([]byte("{not json"), "event", "--repo", "k9", "--cli", "claude", "--hook", "Stop")
	if code != 2 || resp["code"] != "usage" || !strings.Contains(fmt.Sprint(resp["error"]), "not JSON") {
		t.Fatalf("event: %d %v", code, resp)
	}
	resp, code, _ = e.verb(nil, "event", "--repo", "k9", "--cli", "codex", "--hook", "notify", "[broken")
	if code != 2 || resp["code"] != "usage" {
		t.Fatalf("codex notify: %d %v", code, resp)
	}
}

// interrupt sends Esc first, then the message, even to a busy session;
// a second --back drops the BACK still queued.
func TestInterruptAndASecondBack(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("int"), "ki", "int", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("ki"); return s == "idle", s })
	e.hold("ki")
	b1 := e.mustVerb([]byte("first back"), "send", "--repo", "ki", "--back")
	b2 := e.mustVerb([]byte("second back"), "send", "--repo", "ki", "--back")
	if b1["delivery"] != "queued" || b2["delivery"] != "queued" {
		t.Fatalf("backs to a busy session: %v %v", b1, b2)
	}
	r := e.mustVerb([]byte("stop that"), "send", "--repo", "ki", "--message", "--interrupt")
	if r["delivery"] != "pasted" {
		t.Fatalf("interrupt: %v", r)
	}
	n := len(e.messages("claude"))
	must(t, os.WriteFile(filepath.Join(e.home, ".standin/release"), nil, 0o600))
	e.waitFor("the interrupting message and then one BACK", func() (bool, string) {
		m := e.messages("claude")
		return len(m) >= n+2, fmt.Sprint(m[n:])
	})
	e.waitFor("idle", func() (bool, string) { s := e.status("ki"); return s == "idle", s })
	m := e.messages("claude")[n:]
	if m[0] != "stop that" || !strings.HasPrefix(m[1], "BACK:") || !strings.HasSuffix(m[1], "second back") || len(m) != 2 {
		t.Errorf("after the hold the CLI got %q; want the interrupt's message, then only the second BACK", m)
	}
	if !strings.Contains(e.standin("claude", "events.jsonl"), `"interrupt"`) {
		t.Error("no Esc reached the CLI")
	}
}

// A crash between the steps of a paste is finished by the next inbox,
// never repeated: a message left pasting with its buffer still loaded is
// pasted once; one left pasted (its buffer gone) gets only its Enter.
func TestACrashMidPasteIsFinishedOnce(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("cr"), "kc", "cr", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("kc"); return s == "idle", s })
	e.kill()
	st := offload.Store{Paths: e.paths}
	m1, err := st.AddMessage("kc", offload.Message{OffloadID: "off1", Body: "left pasting", State: offload.MsgPasting})
	must(t, err)
	must(t, exec.Command("tmux", "set-buffer", "-b", fmt.Sprintf("cbmsg-kc-%d", m1.Seq), "left pasting").Run())
	n := len(e.messages("claude"))
	e.start()
	e.waitFor("the pasting message", func() (bool, string) { m := e.messages("claude"); return len(m) == n+1, fmt.Sprint(m[n:]) })
	e.waitFor("idle", func() (bool, string) { s := e.status("kc"); return s == "idle", s })
	e.kill()
	m2, err := st.AddMessage("kc", offload.Message{OffloadID: "off1", Body: "left pasted", State: offload.MsgPasted})
	must(t, err)
	must(t, exec.Command("tmux", "send-keys", "-t", "=cb-off-kc-claude:", "-l", "left pasted").Run())
	e.start()
	e.waitFor("the pasted message", func() (bool, string) { m := e.messages("claude"); return len(m) == n+2, fmt.Sprint(m[n:]) })
	e.waitFor("idle", func() (bool, string) { s := e.status("kc"); return s == "idle", s })
	if m := e.messages("claude")[n:]; !reflect.DeepEqual(m, []string{"left pasting", "left pasted"}) {
		t.Errorf("the CLI got %q", m)
	}
	for _, seq := range []int64{m1.Seq, m2.Seq} {
		var got offload.Message
		must(t, offload.ReadJSON(filepath.Join(e.paths.State, "kc/inbox", fmt.Sprintf("%010d.json", seq)), &got))
		if got.State != offload.MsgDelivered {
			t.Errorf("message %d is %s", seq, got.State)
		}
	}
}

// A message stored for an idle session whose paste never began (the
// inbox died between storing it and pasting it) is delivered by the next
// inbox at once.
func TestAMessageQueuedForAnIdleSessionIsDeliveredAfterACrash(t *testing.T) {
	e := newEnv(t)
	if _, code := e.macSide(e.hostRepo("cq"), "kq", "cq", "claude", "off1"); code != 0 {
		t.Fatal("send failed")
	}
	e.waitFor("idle", func() (bool, string) { s := e.status("kq"); return s == "idle", s })
	e.kill()
	_, err := offload.Store{Paths: e.paths}.AddMessage("kq", offload.Message{OffloadID: "off1", Body: "stored, never pasted", State: offload.MsgQueued})
	must(t, err)
	e.start()
	e.waitFor("the queued message", func() (bool, string) {
		m := e.messages("claude")
		return m[len(m)-1] == "stored, never pasted", m[len(m)-1]
	})
}
