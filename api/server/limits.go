package server

import (
	"net/http"
	"time"
)

// MaxBody is the most bytes of one request body a route mounted with
// Handle reads (before any decompression: what crosses the wire); a
// longer body fails its reader with *http.MaxBytesError, which connect
// answers RESOURCE_EXHAUSTED and the JSON calls 413. Each surface bounds
// its own messages tighter (connect.WithReadMaxBytes, the console's
// 8 KiB); this bound is for a route that forgot to.
const MaxBody = 1 << 20

// Handle mounts h on pattern (net/http.ServeMux's patterns: "GET /cb/api/devices",
// "/cocoonbox.control.v1.Account/"). Two packages mounting one pattern panic at start.
//
// The request's body is at most MaxBody bytes and must arrive within
// Timeouts.Read of the handler's start (a stalled body is not held for
// ever); once it is read to its end, the deadline no longer applies, so
// a long answer (a server stream, an operation waited on) is not cut.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, s.bounded(h)) }

// HandleStream mounts h on pattern for a call whose request body is a
// stream with no end fixed in advance (Session.Exec's stdin): no total
// size and no read deadline; h bounds each message itself
// (connect.WithReadMaxBytes) and lives as long as its call.
func (s *Server) HandleStream(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// bounded puts MaxBody and the read deadline on h's request bodies.
// net/http lifts the deadline itself once the body is read to its end
// (HTTP/1.1 clears it before its background read; HTTP/2's is the
// stream's body's alone), so it never cuts the answer.
func (s *Server) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if d := s.timeouts.Read; d > 0 {
			// ErrNotSupported (a writer that is no connection's) leaves
			// the body without a clock.
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		h.ServeHTTP(w, r)
	})
}
