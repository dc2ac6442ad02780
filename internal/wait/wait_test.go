package wait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Until(time.Minute, "the third call", func() (bool, string) { calls++; return calls == 3, "" })
	if err != nil || calls != 3 {
		t.Fatalf("Until: %v after %d calls, want nil after 3", err, calls)
	}
}

// The timeout's error names what was awaited and what cond saw last.
func TestUntilNamesWhatItSawLastOnTheTimeout(t *testing.T) {
	n := 0
	err := Until(20*time.Millisecond, "the flag", func() (bool, string) { n++; return false, fmt.Sprint("call ", n) })
	if err == nil || !strings.HasPrefix(err.Error(), "the flag: not within 20ms; last seen: call ") {
		t.Fatalf("Until: %v, want the timeout naming the flag and the last call", err)
	}
	if n < 2 {
		t.Fatalf("cond called %d times within 20 ms, want it polled", n)
	}
}
