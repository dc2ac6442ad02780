// Package server is the api's one HTTP listener: the console, its JSON
// calls, the OAuth endpoints and gRPC (connect-go) share it, over HTTP/1.1
// and cleartext HTTP/2 (h2c, so `grpcurl -plaintext` works). It gives every
// request an id and one log line, answers /healthz, and on shutdown ends
// the calls still open (their contexts are cancelled) before it returns.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// ShutdownGrace is how long Serve waits for open calls to return after it
// cancelled their contexts, before it closes their connections.
const ShutdownGrace = 10 * time.Second

// Server is the mux other packages mount their handlers on, and its listener's life.
type Server struct {
	mux      *http.ServeMux
	log      *slog.Logger
	health   func(context.Context) error
	wrap     []func(http.Handler) http.Handler
	timeouts Timeouts
	// SetConnLimit's
	connsPerAddress int
	connsExempt     []netip.Prefix
}

// Timeouts are the listener's clocks (api.yaml's http section). None of
// them ends an open call: there is no write timeout, and no read timeout
// on a stream's body (HandleStream), since a stream (Session.Exec, a
// watch) lives as long as its call, however long it is silent (Contract:
// Remote command (Session.Exec, cocoonbox rsh)).
type Timeouts struct {
	// ReadHeader bounds reading one request's headers.
	ReadHeader time.Duration
	// Read bounds reading the body of a call mounted with Handle, from
	// the handler's start to the body's end; 0 is no bound.
	Read time.Duration
	// Idle closes a keep-alive connection that has no call open.
	Idle time.Duration
	// PingAfter: an HTTP/2 connection with no frame for this long is
	// pinged; one that does not answer within PingTimeout is closed, and
	// its calls end (a peer that went away without a word).
	PingAfter, PingTimeout time.Duration
}

// DefaultTimeouts are the clocks without configuration.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Idle: 2 * time.Minute, PingAfter: 15 * time.Second, PingTimeout: 15 * time.Second}
}

// Window is the HTTP/2 receive window per stream and per connection: what
// a client may send before the api reads it. Go's default (1 MiB) held a
// full-duplex stream to a few tens of MiB/s; it also bounds what one
// stream makes the api hold.
const Window = 16 << 20

// New makes a server logging to log. health answers /healthz: nil is 200
// "ok", an error 503 with its text (the database's ping, say).
func New(log *slog.Logger, health func(context.Context) error) *Server {
	s := &Server{mux: http.NewServeMux(), log: log, health: health, timeouts: DefaultTimeouts(),
		connsPerAddress: DefaultConnsPerAddress}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	return s
}

// SetTimeouts replaces DefaultTimeouts; call it before Serve.
func (s *Server) SetTimeouts(t Timeouts) { s.timeouts = t }

// Wrap puts mw around the whole mux (inside the request log, so the log still
// sees what mw answers), for checks that apply to every route.
func (s *Server) Wrap(mw func(http.Handler) http.Handler) { s.wrap = append(s.wrap, mw) }

// Handler is the mux with everything Wrap added and the request log around it.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.mux
	for i := len(s.wrap) - 1; i >= 0; i-- {
		h = s.wrap[i](h)
	}
	return s.logRequests(h)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.health != nil {
		if err := s.health(r.Context()); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// Serve answers on ln until ctx is done, then shuts down: it stops
// accepting, cancels every open call's context (a gRPC stream ends), waits
// up to ShutdownGrace for the handlers to return, and closes what is left.
// It returns nil after a shutdown ctx asked for.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	calls, endCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer endCalls()
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           s.Handler(),
		Protocols:         &protocols,
		ReadHeaderTimeout: s.timeouts.ReadHeader,
		// A keep-alive connection with no call open is closed after this;
		// an open stream is a call, so it is never cut by it.
		IdleTimeout: s.timeouts.Idle,
		HTTP2: &http.HTTP2Config{SendPingTimeout: s.timeouts.PingAfter, PingTimeout: s.timeouts.PingTimeout,
			MaxReceiveBufferPerStream: Window, MaxReceiveBufferPerConnection: Window},
		BaseContext: func(net.Listener) context.Context { return calls },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.capped(ln)) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: ending open calls", "addr", ln.Addr().String())
	endCalls()
	grace, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(grace); err != nil {
		s.log.Warn("calls still open after the grace period: closing their connections", "grace", ShutdownGrace)
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
