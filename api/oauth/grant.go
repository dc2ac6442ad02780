package oauth

import (
	"context"
	"time"
)

// Grant is the principal of an agent's access token (cba_): the grant the
// user approved on the consent page, its caps, and when it ends. Every
// live access token of one grant answers the same *Grant on this api.
//
// Contract: OAuth for agents (what a grant reaches).
type Grant struct {
	// ID is the grant's id (cbg_ + 24 hex), oauth_grants.id.
	ID string
	// UserID and UserName are the user who approved it: the grant acts as
	// them, within its caps.
	UserID   string
	UserName string
	// ClientID is the client's client_id (32 hex digits, or its metadata
	// document's URL); ClientName its client_name ("" when it gave none).
	ClientID   string
	ClientName string
	// VerifiedHost is the metadata document's host; "" for a registered
	// client (shown as unverified).
	VerifiedHost string
	// MaxBoxes bounds the boxes the grant holds (1..16), MaxRunning those
	// of them starting, running or hibernating (1..MaxBoxes).
	MaxBoxes   int
	MaxRunning int
	// ExpiresAt is when the grant ends unless revoked before.
	ExpiresAt time.Time

	ctx context.Context
}

// Done is closed once the grant no longer works on this api: revoked (the
// Agents page, /cocoonbox.oauth/revoke, a replayed refresh token),
// expired, or its user disabled or deleted. Every call open under it ends
// then.
func (g *Grant) Done() <-chan struct{} { return g.ctx.Done() }

// Context is a context that ends with the grant (as Done).
func (g *Grant) Context() context.Context { return g.ctx }

type grantKey struct{}

// WithGrant answers ctx carrying g: the control MCP puts the grant of a
// cba_ token in each request's and each tool call's context.
func WithGrant(ctx context.Context, g *Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// GrantFrom answers the grant whose access token the call carries, put in
// ctx by the control MCP's bearer check (api/mcp/auth.go); false for a
// call under the user's own token (personal or device).
func GrantFrom(ctx context.Context) (*Grant, bool) {
	g, ok := ctx.Value(grantKey{}).(*Grant)
	return g, ok && g != nil
}
