package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
)

// What a sign-in pays for its two limits now that they live in
// PostgreSQL: one Take of a fresh key (an insert) and of a key under its
// limit (the upsert), and one refused (the upsert, then the read).
func BenchmarkTake(b *testing.B) {
	db := dbtest.New(b, Schema)
	l, err := New(db.Pool, "bench", 1, time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("granted", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, w, err := l.Take(ctx, fmt.Sprint("k", i)); err != nil || w != 0 {
				b.Fatal(w, err)
			}
		}
	})
	b.Run("refused", func(b *testing.B) {
		l.Take(ctx, "full")
		for b.Loop() {
			if _, w, err := l.Take(ctx, "full"); err != nil || w == 0 {
				b.Fatal(w, err)
			}
		}
	})
}
