package ratelimit

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLimiter(t *testing.T, burst int, window time.Duration) (*Limiter, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	l, err := New(burst, window, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

func TestBurstThenOneEveryWindowOverBurst(t *testing.T) {
	l, c := newLimiter(t, 3, 15*time.Minute)
	for i := range 3 {
		if _, wait := l.Take("alice"); wait != 0 {
			t.Fatalf("take %d: wait %s, want none within the burst", i+1, wait)
		}
	}
	// The fourth waits for one refill: 15 min / 3 = 5 min.
	if _, wait := l.Take("alice"); wait != 5*time.Minute {
		t.Fatalf("fourth take: wait %s, want 5m0s", wait)
	}
	// Another key has its own bucket.
	if _, wait := l.Take("bob"); wait != 0 {
		t.Fatalf("bob waits %s behind alice", wait)
	}
	c.add(5*time.Minute - time.Millisecond)
	if _, wait := l.Take("alice"); wait != time.Second {
		t.Fatalf("1 ms before the refill: wait %s, want 1s (rounded up)", wait)
	}
	c.add(time.Millisecond)
	if _, wait := l.Take("alice"); wait != 0 {
		t.Fatalf("at the refill: wait %s, want none", wait)
	}
}

// A refused Take takes nothing: hammering a full key does not push its
// refill further away.
func TestRefusedTakeTakesNothing(t *testing.T) {
	l, c := newLimiter(t, 1, time.Minute)
	l.Take("k")
	for range 100 {
		l.Take("k")
	}
	c.add(time.Minute)
	if _, wait := l.Take("k"); wait != 0 {
		t.Fatalf("after one window: wait %s; refused takes counted", wait)
	}
}

func TestReturnedTicketDoesNotCount(t *testing.T) {
	l, _ := newLimiter(t, 2, time.Hour)
	for range 10 {
		tk, wait := l.Take("alice")
		if wait != 0 {
			t.Fatalf("wait %s although every ticket was returned", wait)
		}
		tk.Return()
		tk.Return() // twice is once
	}
	var zero Ticket
	zero.Return()
	l.Take("alice")
	l.Take("alice")
	if _, wait := l.Take("alice"); wait == 0 {
		t.Fatal("the control case: two kept tickets should empty a burst of 2")
	}
}

func TestSweepForgetsFullBuckets(t *testing.T) {
	l, c := newLimiter(t, 2, 10*time.Minute)
	l.Take("old")
	c.add(10 * time.Minute)
	l.Take("new")
	if n := l.keyCount(); n != 1 {
		t.Fatalf("%d keys after a sweep, want 1 (the full bucket of old forgotten)", n)
	}
	c.add(time.Minute)
	if _, wait := l.Take("new"); wait != 0 {
		t.Fatalf("a key still refilling was forgotten or miscounted: wait %s", wait)
	}
}

func TestNewRefusesBadLimits(t *testing.T) {
	for _, c := range []struct {
		burst  int
		window time.Duration
		want   string
	}{{0, time.Minute, "burst 0"}, {1, 0, "window 0s"}, {1, -time.Second, "window -1s"}} {
		if _, err := New(c.burst, c.window, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%d, %s): %v, want an error naming %q", c.burst, c.window, err, c.want)
		}
	}
}

func TestClientKey(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"direct client", "203.0.113.7:5000", nil, "203.0.113.7"},
		{"an untrusted peer's header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, "203.0.113.7"},
		{"through the proxy", "127.0.0.1:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a client's forged entry before the proxy's", "127.0.0.1:5000", []string{"10.9.9.9, 198.51.100.1"}, "198.51.100.1"},
		{"garbage from the client", "127.0.0.1:5000", []string{"not-an-ip, 198.51.100.1"}, "198.51.100.1"},
		{"two header lines", "127.0.0.1:5000", []string{"10.9.9.9", "198.51.100.1"}, "198.51.100.1"},
		{"the proxy without a header", "127.0.0.1:5000", nil, "127.0.0.1"},
		{"IPv6 counts by /64", "[2001:db8:1:2:aaaa::1]:443", nil, "2001:db8:1:2::/64"},
		{"IPv6 behind the proxy", "[::1]:443", []string{"2001:db8:1:2:bbbb::9"}, "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6", "[::ffff:203.0.113.7]:1", nil, "203.0.113.7"},
	} {
		r := httptest.NewRequest("POST", "/cb/api/session", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := ClientKey(r, loopback); got != c.want {
			t.Errorf("%s: ClientKey = %q, want %q", c.name, got, c.want)
		}
	}
}
