// Package ratelimit bounds how often one key (a user name, a client
// address) may do something costly or guessable, such as a password
// sign-in: a token bucket per key (golang.org/x/time/rate), held in this
// api's memory. Several apis behind one balancer each keep their own
// buckets, so a client that reaches n of them gets up to n times the limit.
package ratelimit

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter lets each key do at most Burst events at once and then one more
// every Window/Burst: Burst events in any Window, once the bucket has
// emptied. Build it with New; it is safe for concurrent use.
type Limiter struct {
	burst int
	every rate.Limit
	now   func() time.Time

	mu    sync.Mutex
	keys  map[string]*rate.Limiter
	swept time.Time
}

// New is a Limiter of burst events (at least 1) per window (positive) for
// every key, reading the time from now (nil: time.Now). A bad value is an
// error naming it.
func New(burst int, window time.Duration, now func() time.Time) (*Limiter, error) {
	if burst < 1 {
		return nil, fmt.Errorf("ratelimit: burst %d: must be at least 1", burst)
	}
	if window <= 0 {
		return nil, fmt.Errorf("ratelimit: window %s: must be positive", window)
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{burst: burst, every: rate.Limit(float64(burst) / window.Seconds()), now: now,
		keys: map[string]*rate.Limiter{}, swept: now()}, nil
}

// Ticket is one event a key took; Return gives it back.
type Ticket struct {
	l *Limiter
	r *rate.Reservation
}

// Return gives the event back, as if it had not been taken (a sign-in that
// turned out right does not count against its user name), as far as the
// events taken since allow. Returning twice, or a zero Ticket, does nothing.
func (t *Ticket) Return() {
	if t.r == nil {
		return
	}
	t.r.CancelAt(t.l.now())
	t.r = nil
}

// Take takes one event of key now. It answers the Ticket and 0 when the
// key had one left; otherwise nothing is taken and it answers how long
// until the key has one (rounded up to a whole second, at least 1 s, for
// a Retry-After header).
func (l *Limiter) Take(key string) (Ticket, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b, ok := l.keys[key]
	if !ok {
		b = rate.NewLimiter(l.every, l.burst)
		l.keys[key] = b
	}
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return Ticket{}, (d + time.Second - 1).Truncate(time.Second)
	}
	return Ticket{l: l, r: r}, 0
}

// sweep forgets, at most once a minute, the keys whose bucket is full
// again: a full bucket is what a new key gets, so nothing changes for
// them, and the map holds only keys active within the last Window. The
// caller holds l.mu.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for k, b := range l.keys {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.keys, k)
		}
	}
}

// keyCount is how many keys the Limiter holds (for the sweep's test).
func (l *Limiter) keyCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
