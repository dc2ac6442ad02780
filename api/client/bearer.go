package client

// The client's side of the api's token check (the check itself is
// api/tokens). Contract: Browser sign-in and device tokens.

import (
	"context"

	"connectrpc.com/connect"
)

// BearerInterceptor puts token on every call a connect client makes, unary or
// streaming (Boxes.Events, Session.Exec), as Authorization: Bearer <token>.
func BearerInterceptor(token string) connect.Interceptor { return bearerInterceptor(token) }

type bearerInterceptor string

func (b bearerInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearerInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

// WrapStreamingHandler leaves a handler alone: the interceptor is a client's.
func (b bearerInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
