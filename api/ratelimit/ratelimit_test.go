package ratelimit

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/internal/manualclock"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// newLimiter is a Limiter on a fresh database, on a clock of its own.
func newLimiter(t *testing.T, burst int, window time.Duration) (*Limiter, *manualclock.Clock, *dbtest.DB) {
	t.Helper()
	db := dbtest.New(t, Schema)
	c := manualclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	l, err := New(db.Pool, "test.scope", burst, window, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return l, c, db
}

// wait is Take's wait, failing the test on a database error.
func wait(t *testing.T, l *Limiter, key string) time.Duration {
	t.Helper()
	_, w, err := l.Take(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestBurstThenOneEveryWindowOverBurst(t *testing.T) {
	t.Parallel()
	l, c, _ := newLimiter(t, 3, 15*time.Minute)
	for i := range 3 {
		if w := wait(t, l, "alice"); w != 0 {
			t.Fatalf("take %d: wait %s, want none within the burst", i+1, w)
		}
	}
	// The fourth waits for one refill: 15 min / 3 = 5 min.
	if w := wait(t, l, "alice"); w != 5*time.Minute {
		t.Fatalf("fourth take: wait %s, want 5m0s", w)
	}
	// Another key has its own bucket.
	if w := wait(t, l, "bob"); w != 0 {
		t.Fatalf("bob waits %s behind alice", w)
	}
	c.Add(5*time.Minute - time.Millisecond)
	if w := wait(t, l, "alice"); w != time.Second {
		t.Fatalf("1 ms before the refill: wait %s, want 1s (rounded up)", w)
	}
	c.Add(time.Millisecond)
	if w := wait(t, l, "alice"); w != 0 {
		t.Fatalf("at the refill: wait %s, want none", w)
	}
}

// The limits were each api's own, in memory, so a client reaching n apis
// behind a balancer got n times the limit. Two Limiters of one scope on one
// database (two apis) now share each key's bucket; another scope does not.
func TestTwoLimitersOnOneDatabaseShareTheirKeys(t *testing.T) {
	t.Parallel()
	a, c, db := newLimiter(t, 2, time.Hour)
	b, err := New(db.Pool, "test.scope", 2, time.Hour, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(db.Pool, "test.other", 2, time.Hour, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	if wait(t, a, "mallory") != 0 || wait(t, b, "mallory") != 0 {
		t.Fatal("the burst of 2, one take on each api, was refused")
	}
	if w := wait(t, a, "mallory"); w != 30*time.Minute {
		t.Fatalf("a third take on the first api: wait %s, want 30m0s (the second api's take counted)", w)
	}
	if w := wait(t, b, "mallory"); w != 30*time.Minute {
		t.Fatalf("a third take on the second api: wait %s, want 30m0s", w)
	}
	if w := wait(t, other, "mallory"); w != 0 {
		t.Fatalf("another scope's key waits %s", w)
	}
}

// Many takes at once, from many connections, give out exactly the burst.
func TestConcurrentTakesGiveOutExactlyTheBurst(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t, 5, time.Hour)
	var mu sync.Mutex
	var granted int
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			_, w, err := l.Take(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			if w == 0 {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != 5 {
		t.Fatalf("%d of 40 concurrent takes granted, want the burst, 5", granted)
	}
}

// A refused Take takes nothing: hammering a full key does not push its
// refill further away.
func TestRefusedTakeTakesNothing(t *testing.T) {
	t.Parallel()
	l, c, _ := newLimiter(t, 1, time.Minute)
	wait(t, l, "k")
	for range 100 {
		wait(t, l, "k")
	}
	c.Add(time.Minute)
	if w := wait(t, l, "k"); w != 0 {
		t.Fatalf("after one window: wait %s; refused takes counted", w)
	}
}

func TestReturnedTicketDoesNotCount(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t, 2, time.Hour)
	for range 10 {
		tk, w, err := l.Take(ctx, "alice")
		if err != nil || w != 0 {
			t.Fatalf("wait %s (%v) although every ticket was returned", w, err)
		}
		if err := tk.Return(ctx); err != nil {
			t.Fatal(err)
		}
		tk.Return(ctx) // twice is once
	}
	var zero Ticket
	zero.Return(ctx)
	wait(t, l, "alice")
	wait(t, l, "alice")
	if w := wait(t, l, "alice"); w == 0 {
		t.Fatal("the control case: two kept tickets should empty a burst of 2")
	}
}

func TestSweepForgetsFullBuckets(t *testing.T) {
	t.Parallel()
	l, c, db := newLimiter(t, 2, 10*time.Minute)
	wait(t, l, "old")
	c.Add(10 * time.Minute)
	wait(t, l, "new")
	var n int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM rate_limits").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows after a sweep (%v), want 1 (the full bucket of old forgotten)", n, err)
	}
	c.Add(time.Minute)
	if w := wait(t, l, "new"); w != 0 {
		t.Fatalf("a key still refilling was forgotten or miscounted: wait %s", w)
	}
}

func TestNewRefusesBadLimits(t *testing.T) {
	for _, c := range []struct {
		burst  int
		window time.Duration
		want   string
	}{{0, time.Minute, "burst 0"}, {1, 0, "window 0s"}, {1, -time.Second, "window -1s"}, {1, time.Millisecond, "window 1ms: must be at least 1s"}} {
		if _, err := New(nil, "s", c.burst, c.window, nil); err == nil || !strings.Contains(err.Error(), c.want) {
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
