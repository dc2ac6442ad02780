package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
)

// principalKey holds the token's principal in the sdk's TokenInfo.Extra,
// grantKey an agent's grant (oauth.Grant) besides it.
const (
	principalKey = "cocoonbox.principal"
	grantKey     = "cocoonbox.grant"
)

// requireBearer is the sdk's bearer middleware with the api's token check:
// the personal token or a device token, a cbit_ token refused before any
// lookup (tokens.Index.Check), or an agent's access token (cba_) when
// Deps.Grants is set (verifyGrant). A bad or missing token is 401 with the
// middleware's one-line body, and WWW-Authenticate: Bearer with
// resource_metadata when Deps.ResourceMetadata is set. The token's user is
// the session's user, so the sdk refuses a session id under another
// user's token (403).
//
// Contract: Browser sign-in and device tokens; Control MCP; OAuth for
// agents (Discovery).
func (h *Handler) requireBearer(next http.Handler) http.Handler {
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if h.deps.Grants != nil && strings.HasPrefix(token, oauth.AccessPrefix) {
			return h.verifyGrant(ctx, token)
		}
		p, err := h.deps.Tokens.Check(token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		server.SetUser(ctx, p.UserID)
		return &auth.TokenInfo{UserID: p.UserID, Extra: map[string]any{principalKey: p}}, nil
	}
	// Our tokens carry no expiry: they live until revoked. A 401 names
	// the resource's metadata (RFC 9728 §5.1) when OAuth is on.
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true,
		ResourceMetadataURL: h.deps.ResourceMetadata})(bindRequest(next))
}

// verifyGrant checks an agent's access token (cba_, OAuth for agents):
// the request acts as the grant's user, with the grant in its context
// (oauth.GrantFrom) and a principal that ends with the grant
// (tokens.ForGrant). The session's user is the grant, not the user, so a
// session one grant began is no other token's (the sdk answers 403).
func (h *Handler) verifyGrant(ctx context.Context, token string) (*auth.TokenInfo, error) {
	g, err := h.deps.Grants.Check(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	server.SetUser(ctx, g.UserID)
	p := tokens.ForGrant(g.UserID, g.UserName, g.ID, g.Context())
	return &auth.TokenInfo{UserID: g.UserID + " " + g.ID, Extra: map[string]any{principalKey: p, grantKey: g}}, nil
}

// withGrant is ctx with the grant extra carries, if any.
func withGrant(ctx context.Context, extra map[string]any) context.Context {
	if g, ok := extra[grantKey].(*oauth.Grant); ok {
		return oauth.WithGrant(ctx, g)
	}
	return ctx
}

// bindRequest ends every request with the token it carries: a GET's
// event stream outlived its revoked token before (the session ends only
// with the token that initialized it, and a GET may carry another of the
// same user's).
func bindRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *tokens.Principal
		ctx := r.Context()
		if info := auth.TokenInfoFromContext(ctx); info != nil {
			p, _ = info.Extra[principalKey].(*tokens.Principal)
			ctx = withGrant(ctx, info.Extra)
		}
		if p == nil { // requireBearer puts one in every request it passes
			http.Error(w, "no caller: the bearer check did not run", http.StatusInternalServerError)
			return
		}
		ctx, done := tokens.Bind(ctx, p)
		defer done()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bind runs every request of a session with its token's principal in the
// context (what the Boxes service reads), the context ending when that
// token is revoked; a session ends (its event stream and every call open
// on it) when the token that initialized it is revoked.
func (h *Handler) bind(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		var p *tokens.Principal
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			p, _ = extra.TokenInfo.Extra[principalKey].(*tokens.Principal)
			ctx = withGrant(ctx, extra.TokenInfo.Extra)
		}
		if p == nil {
			// requireBearer puts one in every request; without it, no call.
			return nil, fmt.Errorf("%s: no caller: the bearer check did not run", method)
		}
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok && method == "initialize" {
			endWithToken(ss, p)
		}
		ctx, done := tokens.Bind(ctx, p)
		defer done()
		return next(ctx, method, req)
	}
}

// endWithToken closes ss once p's token stops working, and forgets it
// when ss ends first.
func endWithToken(ss *sdk.ServerSession, p *tokens.Principal) {
	revoked, release := tokens.Bind(context.Background(), p)
	stop := context.AfterFunc(revoked, func() { ss.Close() })
	go func() {
		ss.Wait()
		stop()
		release()
	}()
}

// hostCheck refuses, on a loopback listener, a Host that is neither
// localhost nor one of hosts: a page that rebinds its own name to
// 127.0.0.1 must not reach the MCP (403, as the sdk's own check answers).
func hostCheck(hosts []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local != nil && loopback(local.String()) && !loopback(r.Host) && !slices.Contains(hosts, r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopback says whether a host or host:port is localhost or a loopback address.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
