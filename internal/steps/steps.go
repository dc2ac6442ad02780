// Package steps records the steps of one operation (a box's create, its
// wake) with their start and end, so a benchmark can report each step's
// share of the whole (issue 24, Deliver 9: profile first, then change what
// the measurement says). A Timeline travels in a context; code wraps each
// step in Begin and its end func, which do nothing without a Timeline in
// the context, so the path pays one context lookup per step.
package steps

import (
	"context"
	"sync"
	"time"
)

// Span is one step: its name and when it began and ended, as durations
// since the Timeline's start. Steps may overlap (work run beside other
// work), and a step may come more than once.
type Span struct {
	Step       string
	Start, End time.Duration
}

// Took is the step's duration.
func (s Span) Took() time.Duration { return s.End - s.Start }

// Timeline collects the spans of one operation; safe for concurrent use.
type Timeline struct {
	start time.Time
	mu    sync.Mutex
	spans []Span
}

// New starts a timeline now.
func New() *Timeline { return &Timeline{start: time.Now()} }

type key struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t *Timeline) context.Context {
	return context.WithValue(ctx, key{}, t)
}

// From returns the timeline ctx carries, or nil.
func From(ctx context.Context) *Timeline {
	t, _ := ctx.Value(key{}).(*Timeline)
	return t
}

// Begin starts step in ctx's timeline and returns the func that ends it;
// without a timeline both do nothing.
func Begin(ctx context.Context, step string) (end func()) {
	t := From(ctx)
	if t == nil {
		return func() {}
	}
	start := time.Since(t.start)
	return func() { t.Add(Span{Step: step, Start: start, End: time.Since(t.start)}) }
}

// Add records a span measured elsewhere (offsets from the timeline's
// start, as Since gives them).
func (t *Timeline) Add(s Span) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spans = append(t.spans, s)
}

// Start is when the timeline started.
func (t *Timeline) Start() time.Time { return t.start }

// Since is how long ago the timeline started.
func (t *Timeline) Since() time.Duration { return time.Since(t.start) }

// Spans answers the spans recorded so far, in the order they ended.
func (t *Timeline) Spans() []Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Span(nil), t.spans...)
}

// Sum is the total time each step took, by name (a step that came more
// than once is summed).
func (t *Timeline) Sum() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range t.Spans() {
		out[s.Step] += s.Took()
	}
	return out
}
