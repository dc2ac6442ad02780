package boxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// Handler is cocoonbox.control.v1.Boxes over a Service. The token check
// (package tokens' interceptor) runs before it; user reads the caller's
// user id from the context.
type Handler struct {
	s     *Service
	user  func(context.Context) (string, bool)
	log   *slog.Logger
	down  error // why there is no Service (every call but Usage UNAVAILABLE)
	usage Usage // nil: nothing metered
}

var _ controlv1connect.BoxesHandler = (*Handler)(nil)

// NewHandler is the Boxes service of s.
func NewHandler(s *Service, user func(context.Context) (string, bool), log *slog.Logger) *Handler {
	return &Handler{s: s, user: user, log: log}
}

// Unavailable is the Boxes service of an api whose supervisor did not
// start: every call answers UNAVAILABLE with why.
func Unavailable(why error) *Handler {
	return &Handler{down: why}
}

// WithUsage is h answering Usage with usage (api/usage's figures from
// gw's meter), as it does without a supervisor too; user answers the
// caller for it.
func (h *Handler) WithUsage(usage Usage, user func(context.Context) (string, bool), log *slog.Logger) *Handler {
	c := *h
	c.usage, c.user, c.log = usage, user, log
	return &c
}

// Service is the Service behind the handler, for what else of the api
// acts on boxes (Session.Exec's Locate, the MCP's WaitOperation); the
// error is why there is none (an api without a supervisor), wrapping
// ErrUnavailable.
func (h *Handler) Service() (*Service, error) {
	if h.down != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, h.down)
	}
	return h.s, nil
}

func (h *Handler) who(ctx context.Context) (string, error) {
	if h.down != nil {
		return "", connect.NewError(connect.CodeUnavailable, h.down)
	}
	u, ok := h.user(ctx)
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	return u, nil
}

// Code is the connect code of an error of this package (the one place
// they are mapped; the MCP maps them with errors.Is the same way).
func Code(err error) connect.Code {
	switch {
	case errors.Is(err, ErrInvalid):
		return connect.CodeInvalidArgument
	case errors.Is(err, ErrNotFound):
		return connect.CodeNotFound
	case errors.Is(err, ErrExists):
		return connect.CodeAlreadyExists
	case errors.Is(err, ErrBusy), errors.Is(err, ErrState), errors.Is(err, ErrNotRunning):
		return connect.CodeFailedPrecondition
	case errors.Is(err, ErrLimit):
		return connect.CodeResourceExhausted
	case errors.Is(err, ErrUnavailable):
		return connect.CodeUnavailable
	case errors.Is(err, ErrOwnerOnly):
		return connect.CodePermissionDenied
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	}
	return connect.CodeInternal
}

func (h *Handler) status(ctx context.Context, what string, err error) error {
	code := Code(err)
	if code == connect.CodeInternal {
		h.log.ErrorContext(ctx, what+" failed", "err", err)
		return connect.NewError(code, errors.New(what+" failed; try again"))
	}
	if code == connect.CodeUnavailable {
		// The supervisor holding the box is out of reach for now.
		return client.MayRetry(connect.NewError(code, err))
	}
	return connect.NewError(code, err)
}

func opResponse(b *Box, op *Operation) *connect.Response[controlv1.OperationResponse] {
	resp := &controlv1.OperationResponse{}
	if b != nil {
		resp.Box = b.proto()
	}
	if op != nil {
		resp.Operation = op.proto()
	}
	return connect.NewResponse(resp)
}

// mutate runs one mutating call for the caller.
func (h *Handler) mutate(ctx context.Context, what string, c Call, f func(context.Context, Call) (*Box, *Operation, error)) (*connect.Response[controlv1.OperationResponse], error) {
	u, err := h.who(ctx)
	if err != nil {
		return nil, err
	}
	c.UserID = u
	b, op, err := f(ctx, c)
	if err != nil {
		return nil, h.status(ctx, what, err)
	}
	resp := opResponse(b, op)
	if op != nil {
		// A client follows the operation from here, not the box's whole log.
		if resp.Msg.EventsAfter, err = h.s.eventsBefore(ctx, op.ID); err != nil {
			return nil, h.status(ctx, what, err)
		}
	}
	return resp, nil
}

// List answers the caller's boxes, oldest first.
func (h *Handler) List(ctx context.Context, _ *connect.Request[controlv1.ListBoxesRequest]) (*connect.Response[controlv1.ListBoxesResponse], error) {
	u, err := h.who(ctx)
	if err != nil {
		return nil, err
	}
	bs, err := h.s.List(ctx, u)
	if err != nil {
		return nil, h.status(ctx, "list boxes", err)
	}
	resp := &controlv1.ListBoxesResponse{}
	for _, b := range bs {
		resp.Boxes = append(resp.Boxes, b.proto())
	}
	return connect.NewResponse(resp), nil
}

// Status answers one box; a caller with no box gets box unset.
func (h *Handler) Status(ctx context.Context, req *connect.Request[controlv1.BoxStatusRequest]) (*connect.Response[controlv1.BoxStatusResponse], error) {
	u, err := h.who(ctx)
	if err != nil {
		return nil, err
	}
	b, op, err := h.s.Status(ctx, u, req.Msg.Box)
	if errors.Is(err, ErrNotFound) && req.Msg.Box == "" {
		_, latest, err := h.s.Images(ctx)
		if err != nil {
			return nil, h.status(ctx, "status", err)
		}
		return connect.NewResponse(&controlv1.BoxStatusResponse{LatestImage: latest}), nil
	}
	if err != nil {
		return nil, h.status(ctx, "status", err)
	}
	resp := &controlv1.BoxStatusResponse{Box: b.proto()}
	if op != nil {
		resp.Operation = op.proto()
	}
	if resp.LatestImage, resp.UpgradeAvailable, err = h.s.LatestFor(ctx, b); err != nil {
		return nil, h.status(ctx, "status", err)
	}
	return connect.NewResponse(resp), nil
}

// Create begins a create.
func (h *Handler) Create(ctx context.Context, req *connect.Request[controlv1.CreateBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	m := req.Msg
	return h.mutate(ctx, "create", Call{RequestID: m.RequestId}, func(ctx context.Context, c Call) (*Box, *Operation, error) {
		return h.s.Create(ctx, c, CreateRequest{Name: m.Name, Image: m.Image, Restore: m.Restore})
	})
}

// Ensure begins an ensure (or answers nothing to do).
func (h *Handler) Ensure(ctx context.Context, req *connect.Request[controlv1.EnsureBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	m := req.Msg
	return h.mutate(ctx, "ensure", Call{RequestID: m.RequestId, Box: m.Box, Incarnation: m.Incarnation}, h.s.Ensure)
}

// Hibernate begins a hibernate.
func (h *Handler) Hibernate(ctx context.Context, req *connect.Request[controlv1.BoxOperationRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	m := req.Msg
	return h.mutate(ctx, "hibernate", Call{RequestID: m.RequestId, Box: m.Box, Incarnation: m.Incarnation}, h.s.Hibernate)
}

// Save begins a save.
func (h *Handler) Save(ctx context.Context, req *connect.Request[controlv1.BoxOperationRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	m := req.Msg
	return h.mutate(ctx, "save", Call{RequestID: m.RequestId, Box: m.Box, Incarnation: m.Incarnation}, h.s.Save)
}

func confirmed(m *controlv1.ConfirmedBoxRequest, what string) error {
	if !m.Confirm {
		return connect.NewError(connect.CodeInvalidArgument, invalid("confirm", "must be true: %s cannot be undone", what))
	}
	return nil
}

// Upgrade begins an upgrade (confirm must be true).
func (h *Handler) Upgrade(ctx context.Context, req *connect.Request[controlv1.ConfirmedBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	m := req.Msg
	if err := confirmed(m, "an upgrade drops every change outside /home/user and /workspace"); err != nil {
		return nil, err
	}
	return h.mutate(ctx, "upgrade", Call{RequestID: m.RequestId, Box: m.Box, Incarnation: m.Incarnation}, h.s.Upgrade)
}

// Delete begins a delete (confirm must be true).
func (h *Handler) Delete(ctx context.Context, req *connect.Request[controlv1.ConfirmedBoxRequest]) (*connect.Response[controlv1.OperationResponse], error) {
	m := req.Msg
	if err := confirmed(m, "a delete removes the box"); err != nil {
		return nil, err
	}
	return h.mutate(ctx, "delete", Call{RequestID: m.RequestId, Box: m.Box, Incarnation: m.Incarnation}, h.s.Delete)
}

// Usage answers a user's model usage (api/usage's figures from gw's
// meter) for Boxes.Usage.
type Usage func(ctx context.Context, user string, perModel bool) (*controlv1.UsageResponse, error)

// DefaultDailyCapMicros is the daily cap Usage answers without a gw
// (Config.Usage nil), where nothing is metered: every figure zero.
const DefaultDailyCapMicros = 5_000_000

// Usage answers the caller's model usage from gw's meter (Contract: Model
// usage; docs/usage.md): today and this month in micro-dollars, the daily
// cap, and per model when asked; without a supervisor too. UNAVAILABLE
// when gw does not answer.
func (h *Handler) Usage(ctx context.Context, req *connect.Request[controlv1.UsageRequest]) (*connect.Response[controlv1.UsageResponse], error) {
	if h.usage == nil {
		if _, err := h.who(ctx); err != nil {
			return nil, err
		}
		return connect.NewResponse(&controlv1.UsageResponse{DailyCapMicros: DefaultDailyCapMicros, DefaultCap: true,
			RemainingTodayMicros: DefaultDailyCapMicros}), nil
	}
	user, ok := h.user(ctx)
	if !ok {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	u, err := h.usage(ctx, user, req.Msg.GetPerModel())
	if err != nil {
		h.log.Warn("boxes: usage", "user", user, "err", err)
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("model usage cannot be read from gw now; try again"))
	}
	return connect.NewResponse(u), nil
}

// Events streams the caller's events after the cursor until the call
// ends: CANCELED when it is ended (UNAUTHENTICATED by the token check
// when its token was revoked), UNAVAILABLE when the log cannot be read.
func (h *Handler) Events(ctx context.Context, req *connect.Request[controlv1.BoxEventsRequest], stream *connect.ServerStream[controlv1.BoxEvent]) error {
	u, err := h.who(ctx)
	if err != nil {
		return err
	}
	events, err := h.s.Watch(ctx, u, req.Msg.Box, req.Msg.After)
	if err != nil {
		return h.status(ctx, "events", err)
	}
	for e := range events {
		if err := stream.Send(e); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		// The call ended, never of itself: the client went, the api
		// stops, or its token was revoked, which the token check's
		// interceptor answers UNAUTHENTICATED (OK here told a revoked
		// watcher nothing).
		return connect.NewError(connect.CodeCanceled, err)
	}
	return client.MayRetry(connect.NewError(connect.CodeUnavailable, errors.New("the event log could not be read; call again with the last seq")))
}

// Images answers the bootable images and the latest.
func (h *Handler) Images(ctx context.Context, _ *connect.Request[controlv1.ImagesRequest]) (*connect.Response[controlv1.ImagesResponse], error) {
	if _, err := h.who(ctx); err != nil {
		return nil, err
	}
	imgs, latest, err := h.s.Images(ctx)
	if err != nil {
		return nil, h.status(ctx, "images", err)
	}
	resp := &controlv1.ImagesResponse{Latest: latest}
	for _, im := range imgs {
		resp.Images = append(resp.Images, &controlv1.Image{Ref: im.Ref, Version: int32(im.Version), Tier: im.Tier})
	}
	return connect.NewResponse(resp), nil
}
