package connect

import (
	"context"
	"errors"
	"sync"
)

// ErrDisconnected ends a door call whose connector was disconnected while
// it was open (Contract: Connect; Deliver 3: every open door call ends
// with a disconnect).
var ErrDisconnected = errors.New("the connector was disconnected during the call")

// openCalls are the door calls open on this api, by user and connector,
// so that a disconnect ends them.
type openCalls struct {
	mu    sync.Mutex
	calls map[string]map[*context.CancelCauseFunc]struct{}
}

// begin is ctx ending with a disconnect of user's connector, and the func
// that ends the call's registration.
func (o *openCalls) begin(ctx context.Context, user, connector string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := user + "|" + connector
	o.mu.Lock()
	if o.calls == nil {
		o.calls = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if o.calls[key] == nil {
		o.calls[key] = map[*context.CancelCauseFunc]struct{}{}
	}
	o.calls[key][&cancel] = struct{}{}
	o.mu.Unlock()
	return ctx, func() {
		o.mu.Lock()
		delete(o.calls[key], &cancel)
		if len(o.calls[key]) == 0 {
			delete(o.calls, key)
		}
		o.mu.Unlock()
		cancel(nil)
	}
}

// end ends every open call of user's connector with ErrDisconnected.
func (o *openCalls) end(user, connector string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for cancel := range o.calls[user+"|"+connector] {
		(*cancel)(ErrDisconnected)
	}
}
