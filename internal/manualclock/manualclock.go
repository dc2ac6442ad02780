// Package manualclock is a clock a test moves by hand, for the code that
// takes its clock as a func() time.Time: no test sleeps or races the wall
// clock to see time pass.
package manualclock

import (
	"sync"
	"time"
)

// Clock is a time moved only by Add and Set; safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New is a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time (pass c.Now as the code's clock).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
