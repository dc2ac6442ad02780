package toolrequest

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

var replayBinding = Binding{RunID: "run-id", LeaseID: "delivery_requests", Consumer: "coding-agent", RequestID: "r1", Capability: []byte("cap")}

func parse(t *testing.T, payload string) *Request {
	t.Helper()
	r, err := parseRequest([]byte(`{"version":"1","run_id":"run-id","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"r1","capability":"cap","payload":`+payload+`}`), replayBinding)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReplayPolicy (Contract: the dispatcher; "Replay is denied by
// default"): a first claim records; an interrupted relay is retried only
// with exact-digest-replay-v1; a changed same-id request is terminal; a
// cached response is returned whatever the policy.
func TestReplayPolicy(t *testing.T) {
	dir := ReplayDir(t.TempDir(), "run-id", "delivery_requests")
	req := parse(t, `{"a":1}`)
	unlock, err := lockRequest(dir, req.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	rec, err := claimRecord(dir, req, "")
	if err != nil || rec.Fingerprint != req.Fingerprint() || strings.Contains(string(rec.Request), "cap") {
		t.Fatalf("first claim: %+v %v", rec, err)
	}
	if _, err := claimRecord(dir, req, ""); branchbox.RuleOf(err) != branchbox.RuleReplay {
		t.Fatalf("unsigned replay: %v, want blocked", err)
	}
	if rec, err := claimRecord(dir, req, branchbox.ReplayExactDigest); err != nil || rec.Response != nil {
		t.Fatalf("signed exact replay: %+v %v", rec, err)
	}
	if _, err := claimRecord(dir, parse(t, `{"a":2}`), branchbox.ReplayExactDigest); branchbox.RuleOf(err) != branchbox.RuleReplay {
		t.Fatalf("changed request: %v, want terminal", err)
	}
	if err := storeResponse(dir, req.RequestID, rec, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"", branchbox.ReplayExactDigest} {
		got, err := claimRecord(dir, req, policy)
		if err != nil || string(got.Response) != `{"ok":true}` {
			t.Fatalf("cached response (policy %q): %+v %v", policy, got, err)
		}
	}
}

// TestLockSerializesAnId: while one holder has the id, another cannot
// take it; once released (or its process gone) it can.
func TestLockSerializesAnId(t *testing.T) {
	dir := ReplayDir(t.TempDir(), "run-id", "l")
	unlock, err := lockRequest(dir, "r1")
	if err != nil {
		t.Fatal(err)
	}
	try := func() error {
		fd, err := unix.Open(filepath.Join(dir, "r1.lock"), unix.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	}
	if err := try(); err == nil {
		t.Fatal("a second holder took a held id")
	}
	unlock()
	if err := try(); err != nil {
		t.Fatalf("after release: %v", err)
	}
}
