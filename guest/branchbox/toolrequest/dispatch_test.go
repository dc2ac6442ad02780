package toolrequest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// TestDispatchRoundTrip (Contract: the dispatcher): a finalized request
// reaches the endpoint once, as one frame with the capability and a
// newline; the response comes back 0400 of consumer_uid; a second dispatch
// of the id returns the cached response without contacting the endpoint.
func TestDispatchRoundTrip(t *testing.T) {
	e := branchboxtest.NewEndpoint(t)
	s := testSpool(t, e.Path, "")
	write(t, s, "artifact-delivery", request("artifact-delivery", `{"it's": "$${x}", "url": "https://example.invalid/a?b=1&c=<2>"}`))
	res, err := Dispatch(context.Background(), s, "artifact-delivery", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if frame := <-e.Got; string(frame) != string(request("artifact-delivery", `{"it's":"$${x}","url":"https://example.invalid/a?b=1&c=<2>"}`))+"\n" {
		t.Fatalf("the endpoint saw %q", frame)
	}
	st, err := os.Lstat(res.Response)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o400 || st.Sys().(*syscall.Stat_t).Uid != consumer {
		t.Fatalf("response mode %v uid %d", st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
	}
	body, _ := os.ReadFile(res.Response)
	if !strings.Contains(string(body), `"payload":{"echo":{"it's":"$${x}","url":"https://example.invalid/a?b=1&c=<2>"}}`) || strings.Contains(string(body), capability) {
		t.Fatalf("response %s", body)
	}
	again, err := Dispatch(context.Background(), s, "artifact-delivery", time.Second)
	if err != nil || !again.Cached || e.Count() != 1 {
		t.Fatalf("second dispatch: %+v %v, endpoint saw %d", again, err, e.Count())
	}
	if rec, _ := os.ReadFile(filepath.Join(s.Ledger, "artifact-delivery.json")); strings.Contains(string(rec), capability) {
		t.Fatalf("the replay record holds the capability: %s", rec)
	}
}

// TestDispatchWaitsForTheRequest: nothing pending within the window is
// the retryable not-pending; a pending request is dispatched even with a
// zero window; a request finalized while the dispatcher waits is
// dispatched (the wait is on inotify, not a timer).
func TestDispatchWaitsForTheRequest(t *testing.T) {
	e := branchboxtest.NewEndpoint(t)
	s := testSpool(t, e.Path, "")
	if _, err := Dispatch(context.Background(), s, "later", 200*time.Millisecond); !errors.Is(err, ErrNotPending) {
		t.Fatalf("got %v, want not-pending", err)
	}
	// A zero window looks once, and a relay it starts is not cut short.
	write(t, s, "now", request("now", `{}`))
	if _, err := Dispatch(context.Background(), s, "now", 0); err != nil {
		t.Fatalf("a pending request with a zero wait: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Dispatch(context.Background(), s, "later", time.Minute)
		done <- err
	}()
	write(t, s, "later", request("later", `{}`))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDispatchBadInput (Bad input): each case terminal or retryable as
// the contract says, and nothing in responses/.
func TestDispatchBadInput(t *testing.T) {
	reply := func(line string) func([]byte) []byte { return func([]byte) []byte { return []byte(line) } }
	cases := []struct {
		name   string
		answer func(e *branchboxtest.Endpoint) func([]byte) []byte
		policy string
		setup  func(t *testing.T, s *Spool)
		rule   branchbox.Rule // "" with retry: ErrRetryLater
		retry  bool
	}{
		{name: "symlinked request", setup: func(t *testing.T, s *Spool) {
			os.Symlink("/etc/shadow", filepath.Join(s.Dir, RequestsDir, "r.json"))
		}, rule: branchbox.RuleRequestFile},
		{name: "0644 request", setup: func(t *testing.T, s *Spool) {
			os.Chmod(write(t, s, "r", request("r", `{}`)), 0o644)
		}, rule: branchbox.RuleRequestFile},
		{name: "hard-linked request", setup: func(t *testing.T, s *Spool) {
			os.Link(write(t, s, "r", request("r", `{}`)), filepath.Join(s.Dir, RequestsDir, "other"))
		}, rule: branchbox.RuleRequestFile},
		{name: "over 256 KiB", setup: func(t *testing.T, s *Spool) {
			write(t, s, "r", request("r", `{"x":"`+strings.Repeat("x", 256<<10)+`"}`))
		}, rule: branchbox.RuleRequestQuota},
		{name: "17th pending", setup: func(t *testing.T, s *Spool) {
			for i := range MaxPending {
				write(t, s, string(rune('a'+i)), request(string(rune('a'+i)), `{}`))
			}
			write(t, s, "r", request("r", `{}`))
		}, rule: branchbox.RuleRequestQuota},
		{name: "extra top-level field", setup: func(t *testing.T, s *Spool) {
			write(t, s, "r", []byte(strings.Replace(string(request("r", `{}`)), `"payload"`, `"extra":1,"payload"`, 1)))
		}, rule: branchbox.RuleRequestEnvelope},
		{name: "wrong capability", setup: func(t *testing.T, s *Spool) {
			write(t, s, "r", []byte(strings.Replace(string(request("r", `{}`)), capability, "guessed", 1)))
		}, rule: branchbox.RuleRequestCapability},
		{name: "response with another request id", answer: func(*branchboxtest.Endpoint) func([]byte) []byte {
			return reply(`{"version":"1","run_id":"run-demo","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"other","payload":{}}` + "\n")
		}, rule: branchbox.RuleResponseCorrelation},
		{name: "non-JSON frame", answer: func(*branchboxtest.Endpoint) func([]byte) []byte { return reply("ok, done\n") }, rule: branchbox.RuleRequestEnvelope},
		{name: "frame without newline", answer: func(*branchboxtest.Endpoint) func([]byte) []byte { return reply(`{}`) }, rule: branchbox.RuleFraming},
		{name: "endpoint never answers, no replay policy", answer: func(e *branchboxtest.Endpoint) func([]byte) []byte { return e.Hold }, rule: branchbox.RuleReplay},
		{name: "endpoint never answers, exact replay", answer: func(e *branchboxtest.Endpoint) func([]byte) []byte { return e.Hold }, policy: branchbox.ReplayExactDigest, retry: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := branchboxtest.NewEndpoint(t)
			if c.answer != nil {
				e.SetAnswer(c.answer(e))
			}
			s := testSpool(t, e.Path, c.policy)
			s.RelayTimeout = 300 * time.Millisecond
			if c.setup != nil {
				c.setup(t, s)
			} else {
				write(t, s, "r", request("r", `{}`))
			}
			_, err := Dispatch(context.Background(), s, "r", time.Second)
			switch {
			case c.retry && !errors.Is(err, ErrRetryLater):
				t.Fatalf("got %v, want the retryable %v", err, ErrRetryLater)
			case !c.retry && (branchbox.RuleOf(err) != c.rule || errors.Is(err, ErrNotPending) || errors.Is(err, ErrRetryLater)):
				t.Fatalf("got %v, want the terminal rule %s", err, c.rule)
			}
			if got := responses(t, s); len(got) != 0 {
				t.Fatalf("responses/ holds %v after a refusal", got)
			}
		})
	}
}

// TestChangedRequestSameIDTerminal (Contract: "changed or malformed
// same-ID requests remain terminal"), even under exact replay.
func TestChangedRequestSameIDTerminal(t *testing.T) {
	e := branchboxtest.NewEndpoint(t)
	s := testSpool(t, e.Path, branchbox.ReplayExactDigest)
	write(t, s, "r", request("r", `{"a":1}`))
	if _, err := Dispatch(context.Background(), s, "r", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	write(t, s, "r", request("r", `{"a":2}`))
	if _, err := Dispatch(context.Background(), s, "r", 5*time.Second); branchbox.RuleOf(err) != branchbox.RuleReplay {
		t.Fatalf("got %v, want rule %s", err, branchbox.RuleReplay)
	}
	if e.Count() != 1 {
		t.Fatalf("the endpoint saw %d frames", e.Count())
	}
}

// TestDispatchCachedAnswerWithAmpersandByteExact (the replay record is
// byte-exact): an endpoint's answer holding '&', '<' and '>' as they are
// (a URL is enough) is cached byte for byte, so the same request spooled
// again is answered from the cache and accepted, and a dispatcher that
// died between the cache and the response file writes the endpoint's own
// bytes. The record was saved with json.Marshal, which rewrote them as
// \u0026...: the re-dispatch failed with "already holds another response".
func TestDispatchCachedAnswerWithAmpersandByteExact(t *testing.T) {
	e := branchboxtest.NewEndpoint(t)
	s := testSpool(t, e.Path, "")
	body := request("r", `{"link":"https://example.invalid/x?a=1&b=<2>"}`)
	write(t, s, "r", body)
	res, err := Dispatch(context.Background(), s, "r", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := branchboxtest.Correlated(body)
	if got, _ := os.ReadFile(res.Response); string(got) != string(want) || !strings.Contains(string(got), "&b=<2>") {
		t.Fatalf("the response file holds %s, the endpoint answered %s", got, want)
	}
	write(t, s, "r", body)
	if again, err := Dispatch(context.Background(), s, "r", 10*time.Second); err != nil || !again.Cached {
		t.Fatalf("the same request again: %+v %v", again, err)
	}
	// As if the dispatcher died after caching: the cache writes the file.
	if err := os.Remove(res.Response); err != nil {
		t.Fatal(err)
	}
	if _, err := Dispatch(context.Background(), s, "r", time.Second); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(res.Response); string(got) != string(want) {
		t.Fatalf("from the cache: %s, the endpoint answered %s", got, want)
	}
	if e.Count() != 1 {
		t.Fatalf("the endpoint saw %d frames", e.Count())
	}
}

// TestDispatch200KiBAnswer: an endpoint answer of 200 KiB (over the
// relay's 64 KiB buffer, which corrupted it) is cached and answered byte
// for byte.
func TestDispatch200KiBAnswer(t *testing.T) {
	e := branchboxtest.NewEndpoint(t)
	var big strings.Builder
	for i := 0; big.Len() < 200<<10; i++ {
		fmt.Fprintf(&big, "%07x,", i)
	}
	var answer []byte
	e.SetAnswer(func(frame []byte) []byte {
		var req map[string]json.RawMessage
		json.Unmarshal(frame, &req)
		delete(req, "capability")
		req["payload"] = json.RawMessage(`{"artifact":"` + big.String() + `"}`)
		answer, _ = json.Marshal(req)
		return append(answer, '\n')
	})
	s := testSpool(t, e.Path, "")
	write(t, s, "big", request("big", `{}`))
	res, err := Dispatch(context.Background(), s, "big", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(res.Response); len(got) < 200<<10 || string(got) != string(answer) {
		t.Fatalf("a %d-byte answer came back as %d bytes, equal %v", len(answer), len(got), string(got) == string(answer))
	}
}

// TestDispatchRefusesARequestIDThatIsNoFileName (issue 38, Deliver 4):
// the command line refuses --request-id ../escaped, but Dispatch called
// below it created ../escaped.lock outside the replay ledger. Dispatch
// and lockRequest, where the file names are made, now hold the id to the
// request-id grammar (rule field-syntax) before any file is opened, and
// nothing is created beside the ledger.
func TestDispatchRefusesARequestIDThatIsNoFileName(t *testing.T) {
	e := branchboxtest.NewEndpoint(t)
	s := testSpool(t, e.Path, "")
	for _, id := range []string{"../escaped", "a/b", ".hidden", "", "x\n"} {
		_, err := Dispatch(context.Background(), s, id, 0)
		if branchbox.RuleOf(err) != branchbox.RuleSyntax {
			t.Errorf("Dispatch %q: %v; want rule %s", id, err, branchbox.RuleSyntax)
		}
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(s.Ledger), "escaped.lock")); err == nil {
		t.Fatal("Dispatch created escaped.lock outside the ledger")
	}
	if _, err := lockRequest(s.Ledger, "../escaped"); branchbox.RuleOf(err) != branchbox.RuleSyntax {
		t.Fatalf("lockRequest ../escaped: %v", err)
	}
}
