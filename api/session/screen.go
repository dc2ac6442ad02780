package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// VNCPort is the box's VNC server, on its 127.0.0.1 only (Contract: Guest
// (image) ↔ agent, VNC: TigerVNC's Xorg module, SecurityTypes None).
const VNCPort = 5900

// ScreenChunk is the most RFB bytes one data message to the viewer
// carries: a raw 1280×800 frame is 4 MB, 16 messages; Exec's chunk
// (client.ExecChunk), whose size was measured for throughput. A viewer's
// own messages are bounded by MaxMessage.
const ScreenChunk = client.ExecChunk

type screenStream = connect.BidiStream[controlv1.SessionScreenRequest, controlv1.SessionScreenResponse]

// Screen carries the RFB bytes of the caller's box's VNC server both ways
// through the supervisor's port relay (Supervisor.Dial to VNCPort),
// untouched: the viewer and the box's server speak RFB end to end, so
// ContinuousUpdates, Fence and ExtendedClipboard pass as they are. Each
// viewer has a relay connection of its own to the box's server. Nothing
// is buffered beyond a chunk per direction, and a viewer that takes no
// bytes for the stall bound (SetStall) has its relay connection closed,
// so it holds neither the api's memory nor the box's server, and no
// other viewer of the box (docs/screen.md, "Faults").
//
// Errors before connected: UNAUTHENTICATED without a caller,
// INVALID_ARGUMENT for a first message that is not start, NOT_FOUND for a
// box that is not the caller's, FAILED_PRECONDITION for one that is not
// running (docs/screen.md: the screen does not wake a box), UNAVAILABLE
// when the box's VNC does not answer. After connected it ends OK when the
// box's server closes, FAILED_PRECONDITION when the box stops running
// (hibernated, deleted) under it, DEADLINE_EXCEEDED when the viewer took
// no bytes for the stall bound, CANCELED when the viewer goes or the api stops,
// UNAUTHENTICATED when the call's token is revoked (the token check's
// interceptor says so).
//
// Contract: Guest (image) ↔ agent, VNC; Browser sign-in and device tokens
// ("the screen"); docs/screen.md.
func (s *Service) Screen(ctx context.Context, st *screenStream) error {
	userID, err := s.user(ctx)
	if err != nil {
		return err
	}
	first, err := st.Receive()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return invalid("start", "the first message must be start")
	}
	conn, name, err := s.DialScreen(ctx, userID, start.GetBox())
	if err != nil {
		return err
	}
	if err := st.Send(&controlv1.SessionScreenResponse{Msg: &controlv1.SessionScreenResponse_Connected{Connected: true}}); err != nil {
		conn.Close()
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rc, _ := ctx.Value(writerKey{}).(*http.ResponseController)
	return s.splice(ctx, cancel, conn, name, grpcViewer{st, rc, s.stallBound()})
}

type writerKey struct{}

// WithWriteDeadlines is h (the Session handler) with each call's
// http.ResponseController in its context, so a Screen's send to a viewer
// that stopped reading fails at the stall bound (an HTTP/2 stream's write
// deadline resets the stream) instead of holding the call open until the
// client reads or goes. Mount it outside the token check.
func WithWriteDeadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), writerKey{}, http.NewResponseController(w))))
	})
}

// DialScreen locates userID's box (its id, name, or "" for the first) and
// connects to its VNC server through the supervisor's relay: the one
// check of both screen forms (Screen, the WebSocket). Its error is a
// connect error (the status Screen answers). ctx's call is the client
// call the box counts (Locate binds it).
func (s *Service) DialScreen(ctx context.Context, userID, box string) (net.Conn, string, error) {
	b, err := s.boxes.Locate(ctx, userID, box)
	if err != nil {
		return nil, "", s.status(ctx, "find the box", err)
	}
	conn, err := b.Supervisor.Dial(ctx, b.BoxID, VNCPort)
	if err != nil {
		if ce := new(connect.Error); !errors.As(err, &ce) && !errors.Is(err, context.Canceled) {
			s.log.WarnContext(ctx, "screen: the box's VNC did not answer", "box", b.BoxID, "err", err)
			return nil, "", connect.NewError(connect.CodeUnavailable, errors.New("the box's screen (VNC) does not answer: is it a desk box with its desktop up? try again"))
		}
		return nil, "", s.status(ctx, "reach the screen of box "+b.Name, err)
	}
	return s.watch(ctx, userID, b.BoxID, b.Name, conn), b.BoxID, nil
}

// screenConn is a screen's relay connection that DialScreen closes when
// its box stops running: a hibernated box is frozen, and its kernel keeps
// the connection open and silent, so without this the viewer would show
// a still screen until the box woke.
type screenConn struct {
	net.Conn
	name string
	left atomic.Pointer[string] // the box's state once it left running
}

// watch answers conn closed, its box's new state kept, when box id of
// userID leaves running before ctx ends (Locator.Left).
func (s *Service) watch(ctx context.Context, userID, id, name string, conn net.Conn) net.Conn {
	c := &screenConn{Conn: conn, name: name}
	left := s.boxes.Left(ctx, userID, id)
	go func() {
		select {
		case st := <-left:
			c.left.Store(&st)
			conn.Close()
		case <-ctx.Done():
		}
	}()
	return c
}

// ErrStalled is the end of a screen whose viewer took no bytes for the
// stall bound (SetStall): its relay connection was closed so the box's
// server drops that client.
var ErrStalled = errors.New("the viewer took none of the screen's bytes for too long (a stalled client): closed")

// DefaultStall is the stall bound of a Service before SetStall: long
// enough for a browser tab the system slowed, short enough that the box's
// server is not left holding a client nobody reads.
const DefaultStall = 30 * time.Second

// SetStall sets the stall bound: a screen whose viewer has not taken one
// chunk (ScreenChunk) in d ends with ErrStalled (config screen_stall).
func (s *Service) SetStall(d time.Duration) { s.stall = d }

func (s *Service) stallBound() time.Duration {
	if s.stall > 0 {
		return s.stall
	}
	return DefaultStall
}

// viewer is the client's side of a screen: a gRPC stream or a WebSocket.
type viewer interface {
	// receive answers the next bytes from the viewer; io.EOF when it
	// closed its side.
	receive(ctx context.Context) ([]byte, error)
	send(ctx context.Context, b []byte) error
}

// splice copies between conn and v until the box's server closes (nil),
// the box stops running (FAILED_PRECONDITION), the viewer stalls
// (DEADLINE_EXCEEDED wrapping ErrStalled: cancel is called with it, which
// closes conn at once), the viewer goes or ctx ends (CANCELED, which the
// token check turns into UNAUTHENTICATED for a revoked token); conn is
// closed when it returns. cancel cancels ctx.
func (s *Service) splice(ctx context.Context, cancel context.CancelCauseFunc, conn net.Conn, box string, v viewer) error {
	began := time.Now()
	// A revoke, a gone or stalled viewer ends ctx: closing conn unblocks its Read.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	go func() {
		defer cancel(nil)
		for {
			b, err := v.receive(ctx)
			if err != nil {
				return
			}
			if _, err := conn.Write(b); err != nil {
				return
			}
		}
	}()
	// One chunk at a time: a viewer that does not take it within the
	// bound is cut, and the box's server sees its connection close.
	stall := time.AfterFunc(time.Hour, func() { cancel(ErrStalled) })
	stall.Stop()
	defer stall.Stop()
	bound := s.stallBound()
	var sent int64
	buf := make([]byte, ScreenChunk)
	var readErr error
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			stall.Reset(bound)
			serr := v.send(ctx, buf[:n])
			stall.Stop()
			if serr != nil {
				break
			}
			sent += int64(n)
		}
		if err != nil {
			readErr = err
			break
		}
	}
	s.log.InfoContext(ctx, "screen", "box", box, "bytes_to_viewer", sent, "duration", time.Since(began).Round(time.Millisecond))
	if c, ok := conn.(*screenConn); ok {
		if st := c.left.Load(); st != nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("box %s is %s: the screen closed; wake it, then open the screen again", c.name, *st))
		}
	}
	if errors.Is(context.Cause(ctx), ErrStalled) {
		s.log.WarnContext(ctx, "screen: a stalled viewer was cut", "box", box, "bound", bound)
		return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("%w after %s", ErrStalled, bound))
	}
	if ctx.Err() == nil && errors.Is(readErr, io.EOF) {
		return nil // the box's server closed the connection
	}
	return connect.NewError(connect.CodeCanceled, errors.New("the screen was closed: the viewer went, the api stops, or the call's token was revoked"))
}

// grpcViewer is a Session.Screen stream; with rc, each send has bound as
// its write deadline.
type grpcViewer struct {
	st    *screenStream
	rc    *http.ResponseController
	bound time.Duration
}

func (g grpcViewer) receive(context.Context) ([]byte, error) {
	for {
		m, err := g.st.Receive()
		if err != nil {
			return nil, err
		}
		switch msg := m.GetMsg().(type) {
		case *controlv1.SessionScreenRequest_Data:
			if len(msg.Data) > 0 {
				return msg.Data, nil
			}
		case *controlv1.SessionScreenRequest_Start:
			return nil, errors.New("a second start")
		}
	}
}

func (g grpcViewer) send(_ context.Context, b []byte) error {
	if g.rc != nil && g.rc.SetWriteDeadline(time.Now().Add(g.bound)) == nil {
		defer g.rc.SetWriteDeadline(time.Time{})
	}
	return g.st.Send(&controlv1.SessionScreenResponse{Msg: &controlv1.SessionScreenResponse_Data{Data: b}})
}
