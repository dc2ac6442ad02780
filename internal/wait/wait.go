// Package wait is the one way a test, or the demo, waits for something:
// on a condition, never for a time (STYLE.md, "Tests": a helper that
// polls a condition with a deadline and on timeout prints what it saw).
// The booted-box tests, the host-level tests of both modules and `make
// demo` share it.
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Until calls cond until it returns true, or until timeout has passed,
// then answers an error "what: not within TIMEOUT; last seen: SEEN", SEEN
// being cond's second result of its last call (what it saw). cond is
// called at once, then again after 1 ms, the pause doubling up to 50 ms:
// a condition that holds soon is seen soon, one that takes seconds costs
// few calls.
func Until(timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		ok, seen := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v; last seen: %s", what, timeout, seen)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Eventually is Until that stops the test with Until's error (t.Fatal) on
// the timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := Until(timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}
