package shares

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/cocoonbox/cocoonbox/api/session"
)

// SocketPath is the share page's WebSocket: the screen of the share whose
// secret is the socket's first message (text). The secret is never in a
// URL: the link carries it in its fragment, which a browser does not send,
// and the page sends it over the socket, so no request log keeps it.
const SocketPath = "GET /cb/api/share/screen"

// Close codes of the share's socket (RFC 6455 §7.4.2, read by the share
// page), beside session's CloseNotRunning and CloseUnavail for a box
// that is asleep or whose desktop does not answer.
const (
	// CloseNoShare: the secret opens nothing (mistyped, guessed,
	// expired, revoked, its box deleted: one reason, ErrNoShare's).
	CloseNoShare websocket.StatusCode = 4404
	// CloseShareEnded: an open viewer's share was revoked or expired,
	// or its owner signed out everywhere.
	CloseShareEnded websocket.StatusCode = 4410
	// CloseViewOnly: a view-only viewer sent an RFB message ViewOnly
	// cannot frame (its input is dropped, not refused).
	CloseViewOnly websocket.StatusCode = 4403
)

// secretWait bounds how long a socket may take to send its secret.
const secretWait = 30 * time.Second

// Screen is what the share's socket needs of the screen (session.Service).
type Screen interface {
	DialScreen(ctx context.Context, userID, box string) (net.Conn, string, error)
	RelaySocket(ctx context.Context, ws *websocket.Conn, conn net.Conn, box string, filter func([]byte) ([]byte, error),
		end func(error) (websocket.StatusCode, string)) error
}

// Socket serves SocketPath: the share's screen to whoever holds its
// secret, through the same relay as the owner's (session.DialScreen as
// the share's owner, on the share's box). A request whose Origin is not
// the api's own is 403 before the upgrade (session.SameOrigin). After the
// upgrade the first message must be the secret; a secret that opens
// nothing closes with CloseNoShare and ErrNoShare's words alone. A
// view-only share's viewer messages pass through ViewOnly, which drops
// its input; a message it cannot frame closes with CloseViewOnly. A viewer ends with CloseShareEnded when the
// share is revoked (Viewers.Revoke), expires, or its owner signs out
// everywhere (Viewers.EndUser). Each open and close is in the audit log
// (Store.Record). A box that stops running under the viewer closes it
// with session.CloseNotRunning, a viewer that stalls with
// session.CloseStalled. call opens the client call the box counts for idle
// hibernate (boxes.Handler.Call).
func Socket(st *Store, live *Viewers, screen Screen, call func(context.Context) (context.Context, func()), log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := session.SameOrigin(r); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"binary"}, CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return // Accept answered the request
		}
		defer ws.CloseNow()
		ws.SetReadLimit(session.MaxMessage)
		ctx := r.Context()
		// Not a context that ends after the read: coder/websocket closes
		// the connection when the context of its last read ends.
		slow := time.AfterFunc(secretWait, func() { ws.CloseNow() })
		typ, secret, err := ws.Read(ctx)
		if !slow.Stop() || err != nil {
			return
		}
		sh, err := st.Open(ctx, string(secret))
		if typ != websocket.MessageText || err != nil {
			if err != nil && !errors.Is(err, ErrNoShare) {
				log.WarnContext(ctx, "share: look up a secret", "err", err)
			}
			ws.Close(CloseNoShare, "this share link does not work: it may be mistyped, expired or revoked")
			return
		}
		ctx, done := live.Add(ctx, sh.ID, sh.UserID)
		defer done()
		// A revoke between Open and Add ended no viewer: look again.
		if ok, err := st.Still(ctx, sh.ID); err != nil || !ok {
			ws.Close(CloseNoShare, "this share link does not work: it may be mistyped, expired or revoked")
			return
		}
		ctx, stop := context.WithDeadlineCause(ctx, sh.ExpiresAt, ErrExpired)
		defer stop()
		ctx, end := call(ctx)
		defer end()
		conn, box, err := screen.DialScreen(ctx, sh.UserID, sh.BoxID)
		if err != nil {
			code, why := session.CloseCode(err)
			ws.Close(code, why)
			return
		}
		viewer := "v-" + randomHex(8)
		record := func(event, reason string) {
			if err := st.Record(context.WithoutCancel(ctx), Event{ShareID: sh.ID, Event: event, Viewer: viewer, Address: r.RemoteAddr, Reason: reason}); err != nil {
				log.ErrorContext(ctx, "share: the audit log", "share", sh.ID, "err", err)
			}
		}
		record("open", "")
		refusedCh := make(chan error, 1) // the filter's refusal, from the relay's reader
		var filter func([]byte) ([]byte, error)
		if sh.ViewOnly {
			f := &ViewOnly{}
			filter = func(b []byte) ([]byte, error) {
				out, err := f.Filter(b)
				if err != nil {
					select {
					case refusedCh <- err:
					default:
					}
				}
				return out, err
			}
		}
		screen.RelaySocket(ctx, ws, conn, box, filter, func(err error) (websocket.StatusCode, string) {
			cause := context.Cause(ctx)
			var refused error
			select {
			case refused = <-refusedCh:
			default:
			}
			switch {
			case errors.Is(cause, ErrRevoked), errors.Is(cause, ErrExpired), errors.Is(cause, ErrSignedOut):
				record("close", cause.Error())
				return CloseShareEnded, "this share ended: " + cause.Error()
			case errors.Is(err, session.ErrStalled):
				record("close", "the viewer stalled")
				return session.CloseStalled, "this viewer took none of the screen for too long: reload"
			case connect.CodeOf(err) == connect.CodeFailedPrecondition:
				record("close", "the box stopped running")
				return session.CloseNotRunning, "the shared box went to sleep: ask its owner to wake it"
			case refused != nil:
				record("close", refused.Error())
				return CloseViewOnly, "this share is view-only: the viewer sent an RFB message it does not take"
			case err == nil:
				record("close", "the box's screen closed")
				return websocket.StatusNormalClosure, "the box's screen closed"
			case ctx.Err() != nil:
				record("close", "the api stops")
				return websocket.StatusGoingAway, "the screen was closed"
			}
			record("close", "the viewer went")
			return websocket.StatusGoingAway, "the screen was closed"
		})
	})
}
