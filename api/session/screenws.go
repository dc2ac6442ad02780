package session

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"
)

// ScreenSocketPath is the WebSocket form of Screen, for a browser (the
// console's screen page, noVNC): {box} is a box id or name.
const ScreenSocketPath = "GET /cb/api/boxes/{box}/screen"

// ScreenSocket close codes (RFC 6455 §7.4.2, the 4000–4999 range a page
// reads): what ended a screen, so the page says it. The reason text says
// it too.
const (
	CloseNotFound   websocket.StatusCode = 4404 // no such box of the user's
	CloseNotRunning websocket.StatusCode = 4409 // the box is not running: wake it
	CloseEnded      websocket.StatusCode = 4401 // the session ended (signed out)
	CloseUnavail    websocket.StatusCode = 4503 // the box's VNC did not answer
	CloseStalled    websocket.StatusCode = 4408 // the viewer took no bytes for the stall bound
)

// SessionBinder answers the user of r's console session and a context
// that ends with that session (console.Console.BindSession).
type SessionBinder func(r *http.Request) (ctx context.Context, userID string, done func(), ok bool)

// ScreenSocket serves ScreenSocketPath: Screen's bytes as binary WebSocket
// messages (subprotocol "binary", noVNC's). The credential is the console
// session cookie (HttpOnly, SameSite=Strict, Path=/cb/), never a token in
// the URL a log keeps. A request without a session is 401, one whose
// Origin is not the api's own (or absent: the form is for browsers) 403,
// both before the upgrade. After it, a box that cannot be reached closes
// with CloseNotFound, CloseNotRunning or CloseUnavail and the reason; a
// session that ends (sign out, sign out everywhere) closes it with
// CloseEnded, the api stopping with 1001 (going away: the page opens it
// again), a box that stops running under it with CloseNotRunning, a
// viewer that stalls with CloseStalled. call opens the client call the box counts for idle hibernate
// (boxes.Handler.Call).
//
// Contract: Sign out everywhere ("every call open on any of them");
// docs/screen.md.
func (s *Service) ScreenSocket(bind SessionBinder, call func(context.Context) (context.Context, func())) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := SameOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		ctx, userID, done, ok := bind(r)
		if !ok {
			http.Error(w, "sign in to the console first", http.StatusUnauthorized)
			return
		}
		defer done()
		ctx, end := call(ctx)
		defer end()
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"binary"}, CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return // Accept answered the request
		}
		defer ws.CloseNow()
		ws.SetReadLimit(MaxMessage)
		conn, box, err := s.DialScreen(ctx, userID, r.PathValue("box"))
		if err != nil {
			ws.Close(closeCode(err), reason(err))
			return
		}
		s.RelaySocket(ctx, ws, conn, box, nil, func(err error) (websocket.StatusCode, string) {
			switch {
			case err == nil:
				return websocket.StatusNormalClosure, "the box's screen closed"
			case errors.Is(err, ErrStalled):
				return CloseStalled, reason(err)
			case connect.CodeOf(err) == connect.CodeFailedPrecondition:
				return CloseNotRunning, reason(err)
			case r.Context().Err() != nil:
				// The api stops (its calls end with it): not the
				// session, which the next api still has.
				return websocket.StatusGoingAway, "the api stops: the page opens the screen again when it is back"
			case ctx.Err() != nil:
				return CloseEnded, "the console session ended: sign in again"
			}
			return websocket.StatusGoingAway, "the screen was closed"
		})
	})
}

// RelaySocket carries the RFB bytes of conn (DialScreen's) to ws as
// binary messages and ws's binary messages to conn until the box's server
// closes (nil), the box stops running, the viewer stalls (ErrStalled:
// no bytes taken for the stall bound), the viewer goes or ctx ends (an
// error), then closes ws
// with the code and reason end answers for that error (while ws's reads
// still run: the close frame goes first) and answers the error; conn is
// closed when it returns. With
// filter, each viewer message passes through it first and only what it
// answers reaches the box; its error ends the screen (a view-only share's
// RFB filter, shares.ViewOnly). The box is box's id, for the log.
func (s *Service) RelaySocket(ctx context.Context, ws *websocket.Conn, conn net.Conn, box string, filter func([]byte) ([]byte, error),
	end func(error) (websocket.StatusCode, string)) error {
	// The WebSocket's own reads and writes outlive ctx by closeGrace:
	// coder/websocket closes the connection at once when their
	// context ends, and the close frame saying why must go first. A
	// viewer that does not read is cut after closeGrace all the same.
	// A stalled viewer's write is blocked: it gets closeGrace to take it
	// and the close frame that says why.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wsCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	cut := context.AfterFunc(ctx, func() { time.AfterFunc(closeGrace, stop) })
	defer cut()
	var v viewer = wsViewer{ws, wsCtx}
	if filter != nil {
		v = filtered{v, filter}
	}
	err := s.splice(ctx, cancel, conn, box, v)
	ws.Close(end(err))
	return err
}

// filtered is a viewer whose messages pass through f first.
type filtered struct {
	viewer
	f func([]byte) ([]byte, error)
}

func (v filtered) receive(ctx context.Context) ([]byte, error) {
	for {
		b, err := v.viewer.receive(ctx)
		if err != nil {
			return nil, err
		}
		if b, err = v.f(b); err != nil {
			return nil, err
		}
		if len(b) > 0 {
			return b, nil
		}
	}
}

// CloseCode is the close code of a DialScreen error (CloseNotFound,
// CloseNotRunning, CloseUnavail) and its reason cut to a close frame's
// 123 bytes.
func CloseCode(err error) (websocket.StatusCode, string) { return closeCode(err), reason(err) }

// SameOrigin requires a browser's Origin, and the api's own: the cookie
// goes along with a page of any site's WebSocket, so this is the check
// that a page of ours opened it (Cross-Site WebSocket Hijacking).
func SameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return errors.New("origin: the screen's WebSocket is for browsers, which send Origin; a client without one calls Session.Screen")
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return errors.New("origin: " + o + " is not this api's own origin")
	}
	return nil
}

func closeCode(err error) websocket.StatusCode {
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return CloseNotFound
	case connect.CodeFailedPrecondition:
		return CloseNotRunning
	}
	return CloseUnavail
}

// reason is err's message cut to a close frame's 123 bytes.
func reason(err error) string {
	m := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		m = ce.Message()
	}
	if len(m) > 123 {
		m = m[:120] + "..."
	}
	return m
}

// closeGrace is how long a WebSocket whose screen ended has to take the
// close frame before its connection is closed under it.
const closeGrace = 5 * time.Second

// wsViewer is a screen's WebSocket; ctx bounds its reads and writes.
type wsViewer struct {
	ws  *websocket.Conn
	ctx context.Context
}

func (v wsViewer) receive(context.Context) ([]byte, error) {
	for {
		typ, b, err := v.ws.Read(v.ctx)
		if err != nil {
			return nil, err
		}
		if typ == websocket.MessageBinary && len(b) > 0 {
			return b, nil
		}
	}
}

func (v wsViewer) send(_ context.Context, b []byte) error {
	return v.ws.Write(v.ctx, websocket.MessageBinary, b)
}
