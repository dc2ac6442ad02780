package session

import (
	"context"
	"errors"
	"io"
	"net"
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
// ContinuousUpdates, Fence and ExtendedClipboard pass as they are. Nothing
// is buffered beyond a chunk per direction: a viewer that stops reading
// holds the box's server (TigerVNC then drops frames for it, as it does
// for a slow client), never the api's memory.
//
// Errors before connected: UNAUTHENTICATED without a caller,
// INVALID_ARGUMENT for a first message that is not start, NOT_FOUND for a
// box that is not the caller's, FAILED_PRECONDITION for one that is not
// running (docs/screen.md: the screen does not wake a box), UNAVAILABLE
// when the box's VNC does not answer. After connected it ends OK when the
// box's server closes, CANCELED when the viewer goes or the api stops,
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
	return s.splice(ctx, conn, name, grpcViewer{st})
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
	return conn, b.BoxID, nil
}

// viewer is the client's side of a screen: a gRPC stream or a WebSocket.
type viewer interface {
	// receive answers the next bytes from the viewer; io.EOF when it
	// closed its side.
	receive(ctx context.Context) ([]byte, error)
	send(ctx context.Context, b []byte) error
}

// splice copies between conn and v until the box's server closes (nil),
// the viewer goes or ctx ends (CANCELED, which the token check turns into
// UNAUTHENTICATED for a revoked token); conn is closed when it returns.
func (s *Service) splice(ctx context.Context, conn net.Conn, box string, v viewer) error {
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A revoke or a gone viewer ends ctx: closing conn unblocks its Read.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	go func() {
		defer cancel()
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
	var sent int64
	buf := make([]byte, ScreenChunk)
	var readErr error
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if v.send(ctx, buf[:n]) != nil {
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
	if ctx.Err() == nil && errors.Is(readErr, io.EOF) {
		return nil // the box's server closed the connection
	}
	return connect.NewError(connect.CodeCanceled, errors.New("the screen was closed: the viewer went, the api stops, or the call's token was revoked"))
}

type grpcViewer struct{ st *screenStream }

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
	return g.st.Send(&controlv1.SessionScreenResponse{Msg: &controlv1.SessionScreenResponse_Data{Data: b}})
}
