package shares

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// PagePath is the share page's path; a link is the api's origin, PagePath
// and the secret as its fragment.
const PagePath = "/cb/share"

// Service is cocoonbox.control.v1.Shares (shares.proto) on a Store.
type Service struct {
	st     *Store
	live   *Viewers
	user   func(context.Context) (string, bool)
	origin string
}

var _ controlv1connect.SharesHandler = (*Service)(nil)

// NewService serves st's shares to the caller user answers; Revoke ends
// live's viewers of the share; origin is the api's public origin, the
// links' (config.Issuer).
func NewService(st *Store, live *Viewers, user func(context.Context) (string, bool), origin string) *Service {
	return &Service{st: st, live: live, user: user, origin: origin}
}

// Link is the share page's URL for secret: the secret is the fragment,
// which a browser never sends, so no request log keeps it.
func Link(origin, secret string) string { return origin + PagePath + "#" + secret }

func code(err error) error {
	switch {
	case errors.Is(err, ErrInvalid):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	}
	return connect.NewError(connect.CodeInternal, errors.New("the shares could not be read or written"))
}

func (s *Service) caller(ctx context.Context) (string, error) {
	u, ok := s.user(ctx)
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	return u, nil
}

func ms(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMilli()
}

func (s *Service) message(sh Share) *controlv1.Share {
	return &controlv1.Share{Id: sh.ID, BoxId: sh.BoxID, BoxName: sh.BoxName, ViewOnly: sh.ViewOnly,
		CreatedAtMs: sh.CreatedAt.UnixMilli(), ExpiresAtMs: sh.ExpiresAt.UnixMilli(), RevokedAtMs: ms(sh.RevokedAt),
		Viewers: int32(s.live.Count(sh.ID))}
}

// CreateShare implements Shares.CreateShare.
func (s *Service) CreateShare(ctx context.Context, req *connect.Request[controlv1.CreateShareRequest]) (*connect.Response[controlv1.CreateShareResponse], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	sh, secret, err := s.st.Create(ctx, user, req.Msg.Box, req.Msg.ViewOnly, int(req.Msg.Days))
	if err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&controlv1.CreateShareResponse{Share: s.message(sh), Link: Link(s.origin, secret)}), nil
}

// ListShares implements Shares.ListShares.
func (s *Service) ListShares(ctx context.Context, _ *connect.Request[controlv1.ListSharesRequest]) (*connect.Response[controlv1.ListSharesResponse], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	list, err := s.st.List(ctx, user)
	if err != nil {
		return nil, code(err)
	}
	out := &controlv1.ListSharesResponse{}
	for _, sh := range list {
		out.Shares = append(out.Shares, s.message(sh))
	}
	return connect.NewResponse(out), nil
}

// RevokeShare implements Shares.RevokeShare: the link stops working and
// the share's viewers open on this api close at once.
func (s *Service) RevokeShare(ctx context.Context, req *connect.Request[controlv1.RevokeShareRequest]) (*connect.Response[controlv1.Share], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	sh, err := s.st.Revoke(ctx, user, req.Msg.Id)
	if err != nil {
		return nil, code(err)
	}
	s.live.Revoke(sh.ID)
	return connect.NewResponse(s.message(sh)), nil
}

// ShareLog implements Shares.ShareLog.
func (s *Service) ShareLog(ctx context.Context, req *connect.Request[controlv1.ShareLogRequest]) (*connect.Response[controlv1.ShareLogResponse], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	list, err := s.st.Log(ctx, user, req.Msg.Id)
	if err != nil {
		return nil, code(err)
	}
	out := &controlv1.ShareLogResponse{}
	for _, e := range list {
		out.Events = append(out.Events, &controlv1.ShareEvent{ShareId: e.ShareID, Event: e.Event, AtMs: e.At.UnixMilli(),
			Viewer: e.Viewer, Address: e.Address, Reason: e.Reason})
	}
	return connect.NewResponse(out), nil
}
