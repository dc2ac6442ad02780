package console

import (
	"context"
	"net/http"
	"sync"
)

// live are the long calls open on console sessions (a screen's
// WebSocket): each ends when its session ends on this api, as a gRPC
// stream ends with its token (Contract: Sign out everywhere, "every call
// open on any of them"; "A named share's screen open in the console ends
// with its viewer too").
type live struct {
	mu     sync.Mutex
	byUser map[string]map[*liveCall]struct{}
}

type liveCall struct {
	sum    [32]byte
	cancel context.CancelFunc
}

// BindSession is Session for a long call: it answers the session's user
// and a context under r's that ends when the session ends on this api
// (its sign-out, sign out everywhere, the user disabled through the
// console's admin), and the function that releases it. ok is false
// without a live session.
func (c *Console) BindSession(r *http.Request) (ctx context.Context, userID string, done func(), ok bool) {
	u, ok := c.Session(r)
	if !ok {
		return nil, "", nil, false
	}
	sum, _ := cookieSum(r)
	ctx, cancel := context.WithCancel(r.Context())
	call := &liveCall{sum: sum, cancel: cancel}
	c.live.mu.Lock()
	if c.live.byUser == nil {
		c.live.byUser = map[string]map[*liveCall]struct{}{}
	}
	if c.live.byUser[u.ID] == nil {
		c.live.byUser[u.ID] = map[*liveCall]struct{}{}
	}
	c.live.byUser[u.ID][call] = struct{}{}
	c.live.mu.Unlock()
	return ctx, u.ID, func() {
		cancel()
		c.live.mu.Lock()
		delete(c.live.byUser[u.ID], call)
		if len(c.live.byUser[u.ID]) == 0 {
			delete(c.live.byUser, u.ID)
		}
		c.live.mu.Unlock()
	}, true
}

// endLive ends userID's calls open on the session sum, or on every
// session of the user when sum is nil.
func (c *Console) endLive(userID string, sum *[32]byte) {
	c.live.mu.Lock()
	defer c.live.mu.Unlock()
	for call := range c.live.byUser[userID] {
		if sum == nil || call.sum == *sum {
			call.cancel()
		}
	}
}
