package vault

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// BoxWithoutKeys is a box of the user whose image does not intercept, so
// it gets no host-only entries (ListKeys and GET /cb/api/keys say so).
type BoxWithoutKeys struct {
	Box   string `json:"box"`
	Image string `json:"image"`
}

// Service is cocoonbox.control.v1.Keys. The token check runs before it
// and puts the user in the context.
type Service struct {
	store       *Store
	userID      func(context.Context) (string, bool)
	withoutKeys func(ctx context.Context, owner string) ([]BoxWithoutKeys, error)
	log         *slog.Logger
}

var _ controlv1connect.KeysHandler = (*Service)(nil)

// NewService is the Keys service of store. userID reads the caller from
// the context; withoutKeys (may be nil) lists the owner's boxes that get
// no keys.
func NewService(store *Store, userID func(context.Context) (string, bool),
	withoutKeys func(context.Context, string) ([]BoxWithoutKeys, error), log *slog.Logger) *Service {
	return &Service{store: store, userID: userID, withoutKeys: withoutKeys, log: log}
}

func (s *Service) who(ctx context.Context) (string, error) {
	id, ok := s.userID(ctx)
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	return id, nil
}

// status is an error of the store as a connect code, at this one edge.
func (s *Service) status(ctx context.Context, what string, err error) error {
	switch {
	case errors.Is(err, ErrInvalid):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, ErrExists):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, ErrWrongMasterKey):
		s.log.ErrorContext(ctx, what+" failed", "err", err)
		return connect.NewError(connect.CodeFailedPrecondition, ErrWrongMasterKey)
	}
	s.log.ErrorContext(ctx, what+" failed", "err", err)
	return connect.NewError(connect.CodeInternal, errors.New(what+" failed; try again"))
}

// Proto is k as the Keys service answers it.
func (k Key) Proto() *controlv1.Key {
	pk := &controlv1.Key{Name: k.Name, Hosts: k.Hosts, How: k.How, Placeholder: k.Placeholder, CreatedAt: timestamppb.New(k.Created)}
	if !k.Rotated.IsZero() {
		pk.RotatedAt = timestamppb.New(k.Rotated)
	}
	return pk
}

// AddKey implements controlv1connect.KeysHandler.
func (s *Service) AddKey(ctx context.Context, req *connect.Request[controlv1.AddKeyRequest]) (*connect.Response[controlv1.AddKeyResponse], error) {
	owner, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	k, err := s.store.Add(ctx, owner, ActorCLI, m.Name, Spec{Hosts: m.Hosts, Header: m.Header, Template: m.Template, Query: m.Query}, NewSecret(m.Value))
	if err != nil {
		return nil, s.status(ctx, "add key", err)
	}
	return connect.NewResponse(&controlv1.AddKeyResponse{Key: k.Proto()}), nil
}

// ListKeys implements controlv1connect.KeysHandler.
func (s *Service) ListKeys(ctx context.Context, _ *connect.Request[controlv1.ListKeysRequest]) (*connect.Response[controlv1.ListKeysResponse], error) {
	owner, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	keys, boxes, err := s.List(ctx, owner)
	if err != nil {
		return nil, s.status(ctx, "list keys", err)
	}
	resp := &controlv1.ListKeysResponse{}
	for _, k := range keys {
		resp.Keys = append(resp.Keys, k.Proto())
	}
	for _, b := range boxes {
		resp.BoxesWithoutKeys = append(resp.BoxesWithoutKeys, &controlv1.BoxWithoutKeys{Box: b.Box, Image: b.Image})
	}
	return connect.NewResponse(resp), nil
}

// List is the owner's keys and the boxes that get none (ListKeys, GET
// /cb/api/keys).
func (s *Service) List(ctx context.Context, owner string) ([]Key, []BoxWithoutKeys, error) {
	keys, err := s.store.List(ctx, owner)
	if err != nil {
		return nil, nil, err
	}
	boxes := []BoxWithoutKeys{}
	if s.withoutKeys != nil && len(keys) > 0 {
		if boxes, err = s.withoutKeys(ctx, owner); err != nil {
			return nil, nil, err
		}
	}
	return keys, boxes, nil
}

// RotateKey implements controlv1connect.KeysHandler.
func (s *Service) RotateKey(ctx context.Context, req *connect.Request[controlv1.RotateKeyRequest]) (*connect.Response[controlv1.RotateKeyResponse], error) {
	owner, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	k, err := s.store.Rotate(ctx, owner, ActorCLI, req.Msg.Name, NewSecret(req.Msg.Value))
	if err != nil {
		return nil, s.status(ctx, "rotate key", err)
	}
	return connect.NewResponse(&controlv1.RotateKeyResponse{Key: k.Proto()}), nil
}

// DeleteKey implements controlv1connect.KeysHandler.
func (s *Service) DeleteKey(ctx context.Context, req *connect.Request[controlv1.DeleteKeyRequest]) (*connect.Response[controlv1.DeleteKeyResponse], error) {
	owner, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.store.Delete(ctx, owner, ActorCLI, req.Msg.Name); err != nil {
		return nil, s.status(ctx, "delete key", err)
	}
	return connect.NewResponse(&controlv1.DeleteKeyResponse{}), nil
}
