package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"
)

// RequestIDHeader carries the request id: taken from the client when it is
// a plain token of at most 64 characters, else made here, and always echoed.
const RequestIDHeader = "X-Request-Id"

type infoKey struct{}

// info is what the log line learns while the request runs.
type info struct {
	id   string
	user string
}

// RequestID is the id of the request ctx belongs to ("" outside a request).
func RequestID(ctx context.Context) string {
	if i, ok := ctx.Value(infoKey{}).(*info); ok {
		return i.id
	}
	return ""
}

// SetUser names the request's user in its log line (the auth middleware
// calls it once it knows the caller; an id, never a secret).
func SetUser(ctx context.Context, user string) {
	if i, ok := ctx.Value(infoKey{}).(*info); ok {
		i.user = user
	}
}

// logRequests gives each request its id and one log line at its end:
// method, path (never the query, where OAuth codes travel), status, bytes,
// duration, user. Headers are never logged, so no bearer or cookie is.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !plainID(id) {
			b := make([]byte, 8)
			rand.Read(b)
			id = hex.EncodeToString(b)
		}
		i := &info{id: id}
		w.Header().Set(RequestIDHeader, id)
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), infoKey{}, i)))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		level := slog.LevelInfo
		if rec.status >= 500 {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(r.Context(), level, "request",
			slog.String("id", id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("proto", r.Proto), slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
			slog.Duration("took", time.Since(start)), slog.String("user", i.user))
	})
}

func plainID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// recorder notes the status and size; Flush and Unwrap keep streaming
// (connect-go, server-sent pages) working through it.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
