// Package session is cocoonbox.control.v1.Session: one command run in one
// of the caller's boxes, as user through that user's login shell, its
// stdin, stdout, stderr and exit status passed through byte for byte, with
// an optional terminal. `cocoonbox rsh` is its client, and through rsh
// rsync (-e) and git (GIT_SSH_COMMAND) reach a box.
//
// Contract: Remote command (Session.Exec, cocoonbox rsh). The section lost
// its table; issue 11 and session.proto define it: owner only (another
// user's box is NOT_FOUND), no deadline on the stream, and flow control end
// to end, so a slow reader holds the command, never the api's memory.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Locator finds a user's box and the supervisor holding it: box is its
// id, its name, or "" for the user's first box. *boxes.Service is the
// api's; a box that is not the user's wraps boxes.ErrNotFound (another
// user's box is indistinguishable from none), one not running
// boxes.ErrNotRunning, and the machine's id on the supervisor is BoxID.
type Locator interface {
	Locate(ctx context.Context, userID, box string) (boxes.Located, error)
	// Left answers a channel that gets the box's state once it leaves
	// running (boxes.Service.Left): what closes an open screen.
	Left(ctx context.Context, userID, boxID string) <-chan string
}

// BoxUser is the box user every command runs as (Contract: Guest (image)
// ↔ agent, the desktop user).
const BoxUser = "user"

// Service is the Session handler. The token check (package tokens'
// interceptor) runs before it and puts the caller in the context.
type Service struct {
	boxes  Locator
	caller func(context.Context) (string, bool)
	log    *slog.Logger
	stall  time.Duration // SetStall's; 0 is DefaultStall
}

var _ controlv1connect.SessionHandler = (*Service)(nil)

// New is the Session service over boxes; caller reads the calling user's
// id from the context the token check made.
func New(boxes Locator, caller func(ctx context.Context) (userID string, ok bool), log *slog.Logger) *Service {
	return &Service{boxes: boxes, caller: caller, log: log}
}

// Handler returns the path and handler to mount on the api's server, with
// opts (the token check's interceptor). A message is at most MaxMessage
// bytes, so one request never makes the api hold more.
//
// Compression is off: command output is often incompressible, and gzip
// held the sandbox wire's exec streams to about 47 MiB/s.
func (s *Service) Handler(opts ...connect.HandlerOption) (string, http.Handler) {
	return controlv1connect.NewSessionHandler(s, append([]connect.HandlerOption{
		connect.WithReadMaxBytes(MaxMessage), connect.WithCompression("gzip", nil, nil)}, opts...)...)
}

// user is the calling user's id, or UNAUTHENTICATED.
func (s *Service) user(ctx context.Context) (string, error) {
	userID, ok := s.caller(ctx)
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	return userID, nil
}

// MaxMessage bounds one request message: a stdin chunk of at most
// client.ExecChunk bytes and its framing.
const MaxMessage = client.ExecChunk + 1<<10

// status is an error as a connect code, at this one edge: a rule broken
// is INVALID_ARGUMENT, a box not running FAILED_PRECONDITION, one that is
// not the caller's NOT_FOUND, a supervisor out of reach UNAVAILABLE; what
// the caller cannot fix is logged and INTERNAL.
func (s *Service) status(ctx context.Context, what string, err error) error {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, boxes.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, sandbox.ErrInvalid):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, boxes.ErrNotRunning):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%w: wake it first (cocoonbox ensure)", err))
	case errors.Is(err, sandbox.ErrState), errors.Is(err, sandbox.ErrNotFound):
		// The box's row says running, its machine does not (yet): the
		// api's next look at it settles which.
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, sandbox.ErrUnavailable), errors.Is(err, boxes.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	s.log.ErrorContext(ctx, what+" failed", "err", err)
	return connect.NewError(connect.CodeInternal, fmt.Errorf("%s failed; try again", what))
}
