package shares

import (
	"context"
	"errors"
	"sync"
)

// Why a viewer's screen ended, as its context's cause says it (and the
// audit log's close reason).
var (
	ErrRevoked      = errors.New("the share was revoked")
	ErrExpired      = errors.New("the share expired")
	ErrSignedOut    = errors.New("the owner signed out everywhere")
	ErrServerClosed = errors.New("the api stops")
)

// Viewers are the viewers open on this api's shares: Revoke and EndUser
// end them at once. The zero Viewers is ready.
type Viewers struct {
	mu   sync.Mutex
	open map[*viewer]struct{}
}

type viewer struct {
	share, user string
	cancel      context.CancelCauseFunc
}

// Add registers a viewer of share (of user) and answers a context that
// ends, with ErrRevoked or ErrSignedOut as its cause, when the share is
// revoked or its owner signs out everywhere; done removes it.
func (v *Viewers) Add(ctx context.Context, share, user string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &viewer{share: share, user: user, cancel: cancel}
	v.mu.Lock()
	if v.open == nil {
		v.open = map[*viewer]struct{}{}
	}
	v.open[w] = struct{}{}
	v.mu.Unlock()
	return ctx, func() {
		v.mu.Lock()
		delete(v.open, w)
		v.mu.Unlock()
		cancel(nil)
	}
}

// Revoke ends every viewer open on share.
func (v *Viewers) Revoke(share string) {
	v.end(func(w *viewer) bool { return w.share == share }, ErrRevoked)
}

// EndUser ends every viewer open on a share of user's (sign out
// everywhere: Contract, "A named share's screen open in the console ends
// with its viewer too").
func (v *Viewers) EndUser(user string) {
	v.end(func(w *viewer) bool { return w.user == user }, ErrSignedOut)
}

// Count answers how many viewers are open on share.
func (v *Viewers) Count(share string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for w := range v.open {
		if w.share == share {
			n++
		}
	}
	return n
}

// Shares answers the shares with a viewer open now, each once.
func (v *Viewers) Shares() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	seen := map[string]bool{}
	var ids []string
	for w := range v.open {
		if !seen[w.share] {
			seen[w.share] = true
			ids = append(ids, w.share)
		}
	}
	return ids
}

func (v *Viewers) end(match func(*viewer) bool, why error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for w := range v.open {
		if match(w) {
			w.cancel(why)
		}
	}
}
