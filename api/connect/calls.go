package connect

import (
	"context"
	"errors"
	"sync"
)

// ErrDisconnected ends a door call whose connector was disconnected while
// it was open, on any api (Contract: Connect; Deliver 3: every open door
// call ends with a disconnect).
var ErrDisconnected = errors.New("the connector was disconnected during the call")

// ErrSignedOut ends a door call open when its user signed out everywhere,
// on any api (Contract: Sign out everywhere, "every call open on any of
// them").
var ErrSignedOut = errors.New("you signed out everywhere during the call: sign in again")

// ErrTokenEnded ends a door call whose token stopped working while it
// was open: its revoke on any api (the token index follows every api's),
// or its replacement (Contract: Browser sign-in and device tokens, "Every
// call still open on a revoked or replaced token ... ends with it"). Sign
// out everywhere revokes every token a door call can come with, so this
// and ErrSignedOut race on another api, and both say it.
var ErrTokenEnded = errors.New("the token this call came with stopped working (revoked or replaced, or you signed out everywhere)")

// openCall is a door call open on this api: its user, the grant it uses
// and what ends it.
type openCall struct {
	user, grant string
	cancel      context.CancelCauseFunc
}

// openCalls are the door calls open on this api, so that a disconnect or
// sign out everywhere on any api ends them (Follow).
type openCalls struct {
	mu    sync.Mutex
	calls map[*openCall]struct{}
}

// begin is ctx ending with a disconnect of grant or a sign out everywhere
// of user, and the func that ends the call's registration.
func (o *openCalls) begin(ctx context.Context, user, grant string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &openCall{user: user, grant: grant, cancel: cancel}
	o.mu.Lock()
	if o.calls == nil {
		o.calls = map[*openCall]struct{}{}
	}
	o.calls[c] = struct{}{}
	o.mu.Unlock()
	return ctx, func() {
		o.mu.Lock()
		delete(o.calls, c)
		o.mu.Unlock()
		cancel(nil)
	}
}

// end ends every open call for which match is true with cause.
func (o *openCalls) end(match func(*openCall) bool, cause error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for c := range o.calls {
		if match(c) {
			c.cancel(cause)
		}
	}
}

// grants are the grants of the calls open on this api.
func (o *openCalls) grants() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for c := range o.calls {
		out = append(out, c.grant)
	}
	return out
}
