package tokens

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/server"
)

type principalKey struct{}

// FromContext answers the principal the token check put in ctx.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok
}

// UserID answers the id of the user whose token the call carries (the
// principal the token check put in ctx): what the services' handlers are
// given to know their caller.
func UserID(ctx context.Context) (string, bool) {
	p, ok := FromContext(ctx)
	if !ok {
		return "", false
	}
	return p.UserID, true
}

// bearer is the token of an Authorization header value.
func bearer(h string) (string, error) {
	if h == "" {
		return "", ErrNoBearer
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMalformed
	}
	return strings.TrimSpace(tok), nil
}

// authorize checks the request's Authorization header and answers a context
// that carries the principal and ends when the token stops working.
func (ix *Index) authorize(ctx context.Context, header string) (context.Context, context.CancelFunc, error) {
	tok, err := bearer(header)
	if err != nil {
		return nil, nil, err
	}
	p, err := ix.Check(tok)
	if err != nil {
		return nil, nil, err
	}
	server.SetUser(ctx, p.UserID)
	ctx, done := Bind(ctx, p)
	return ctx, done, nil
}

// Bind answers a context under ctx that carries p (FromContext) and ends
// when p's token stops working on this api (revoked, replaced, its user
// disabled), and the function that releases it. A surface that checks
// tokens itself (the control MCP's bearer middleware) binds each call to
// its principal with it, so a revoke ends the call.
func Bind(ctx context.Context, p *Principal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithValue(ctx, principalKey{}, p))
	stop := context.AfterFunc(p.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// refuse answers a request without a live token: 401 with a JSON error
// and WWW-Authenticate (RFC 6750).
func refuse(w http.ResponseWriter, err error) {
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	server.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token", "message": err.Error()})
}

// Guard is the token check in front of a connect (gRPC) handler, as an
// http middleware: a call without a live token is answered
// UNAUTHENTICATED, in the call's protocol (Connect, gRPC, gRPC-Web),
// before anything reads its body, so an anonymous caller's body (a gzip
// bomb) is never read nor decompressed. The call's context carries the
// principal and ends when the token stops working, as Interceptor's;
// Interceptor behind it (which ends such a call UNAUTHENTICATED) finds
// the principal there and checks nothing twice.
func (ix *Index) Guard(next http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, done, err := ix.authorize(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			if !errs.IsSupported(r) {
				refuse(w, err) // not a connect call: its handler would refuse it anyway
				return
			}
			errs.Write(w, r, connect.NewError(connect.CodeUnauthenticated, err))
			return
		}
		defer done()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, guardedKey{}, true)))
	})
}

// guardedKey marks a context Guard bound to its principal.
type guardedKey struct{}

// check is the interceptors' token check: the principal Guard bound, or
// the header's token bound now.
func (ix *Index) check(ctx context.Context, header string) (context.Context, context.CancelFunc, error) {
	if ctx.Value(guardedKey{}) != nil {
		if _, ok := FromContext(ctx); ok {
			return ctx, func() {}, nil
		}
	}
	return ix.authorize(ctx, header)
}

// Interceptor is the token check of connect (gRPC) handlers: a call without a
// live token is UNAUTHENTICATED; a call's context ends when its token is
// revoked, and the call then ends UNAUTHENTICATED too.
func (ix *Index) Interceptor() connect.Interceptor { return interceptor{ix} }

type interceptor struct{ ix *Index }

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, done, err := i.ix.check(ctx, req.Header().Get("Authorization"))
		if err != nil {
			return nil, connect.NewError(connect.CodeUnauthenticated, err)
		}
		defer done()
		resp, err := next(ctx, req)
		return resp, ended(ctx, err)
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, done, err := i.ix.check(ctx, conn.RequestHeader().Get("Authorization"))
		if err != nil {
			return connect.NewError(connect.CodeUnauthenticated, err)
		}
		defer done()
		return ended(ctx, next(ctx, conn))
	}
}

// errRevoked ends a call whose token was revoked while it ran.
var errRevoked = errors.New("the token of this call was revoked: sign in again (cocoonbox login)")

// ended tells a call that ended because its token stopped working as UNAUTHENTICATED.
// A call that succeeded stays a success: one that revoked its own token
// (sign out everywhere, a device revoking itself) did its work.
func ended(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if p, ok := FromContext(ctx); ok && p.ctx.Err() != nil {
		return connect.NewError(connect.CodeUnauthenticated, errRevoked)
	}
	return err
}
