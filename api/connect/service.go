package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	connectrpc "connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/vault"
)

// Service is cocoonbox.control.v1.Connectors. The token check runs before
// it and puts the user in the context.
type Service struct {
	broker *Broker
	userID func(context.Context) (string, bool)
	log    *slog.Logger
}

var _ controlv1connect.ConnectorsHandler = (*Service)(nil)

// NewService is the Connectors service of b; userID reads the caller.
func NewService(b *Broker, userID func(context.Context) (string, bool), log *slog.Logger) *Service {
	return &Service{broker: b, userID: userID, log: log}
}

func (s *Service) who(ctx context.Context) (string, error) {
	id, ok := s.userID(ctx)
	if !ok {
		return "", connectrpc.NewError(connectrpc.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	return id, nil
}

// status is a broker error as a connect code, at this one edge.
func (s *Service) status(ctx context.Context, what string, err error) error {
	var ie *InputError
	switch {
	case errors.As(err, &ie):
		return connectrpc.NewError(connectrpc.CodeInvalidArgument, err)
	case errors.Is(err, ErrExists):
		return connectrpc.NewError(connectrpc.CodeAlreadyExists, err)
	case errors.Is(err, ErrNotFound):
		return connectrpc.NewError(connectrpc.CodeNotFound, err)
	case errors.Is(err, ErrUpstream):
		return connectrpc.NewError(connectrpc.CodeFailedPrecondition, err)
	case errors.Is(err, vault.ErrWrongMasterKey):
		s.log.ErrorContext(ctx, what+" failed", "err", err)
		return connectrpc.NewError(connectrpc.CodeFailedPrecondition, vault.ErrWrongMasterKey)
	}
	s.log.ErrorContext(ctx, what+" failed", "err", err)
	return connectrpc.NewError(connectrpc.CodeInternal, errors.New(what+" failed; try again"))
}

var toProto = map[Policy]controlv1.Policy{PolicyDefault: controlv1.Policy_POLICY_DEFAULT,
	PolicyAllow: controlv1.Policy_POLICY_ALLOW, PolicyAsk: controlv1.Policy_POLICY_ASK, PolicyOff: controlv1.Policy_POLICY_OFF}

// Proto is c as the service answers it.
func (c Connector) Proto() *controlv1.Connector {
	pc := &controlv1.Connector{Id: c.ID, Kind: c.Kind, Url: c.URL, Header: c.Header,
		NeedsReconnect: c.NeedsReconnect, Connected: timestamppb.New(c.Connected)}
	for _, t := range c.Tools {
		pc.Tools = append(pc.Tools, &controlv1.Tool{Name: t.Name, Description: t.Description, Policy: toProto[t.Policy]})
	}
	return pc
}

// ListConnectors answers the catalog and the user's connectors.
func (s *Service) ListConnectors(ctx context.Context, _ *connectrpc.Request[controlv1.ListConnectorsRequest]) (*connectrpc.Response[controlv1.ListConnectorsResponse], error) {
	user, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := s.broker.List(ctx, user)
	if err != nil {
		return nil, s.status(ctx, "list connectors", err)
	}
	out := &controlv1.ListConnectorsResponse{}
	for _, e := range Catalog {
		out.Catalog = append(out.Catalog, &controlv1.CatalogEntry{Id: e.ID, Title: e.Title, Available: e.Available})
	}
	for _, c := range cs {
		out.Connectors = append(out.Connectors, c.Proto())
	}
	return connectrpc.NewResponse(out), nil
}

// ConnectCustom connects a custom MCP server with a header key.
func (s *Service) ConnectCustom(ctx context.Context, req *connectrpc.Request[controlv1.ConnectCustomRequest]) (*connectrpc.Response[controlv1.ConnectCustomResponse], error) {
	user, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	c, err := s.broker.ConnectCustom(ctx, user, Custom{Name: m.GetName(), URL: m.GetUrl(), Header: m.GetHeader(), Key: m.GetKey()})
	if err != nil {
		return nil, s.status(ctx, "connect", err)
	}
	return connectrpc.NewResponse(&controlv1.ConnectCustomResponse{Connector: c.Proto()}), nil
}

// SetPolicy sets one tool's policy.
func (s *Service) SetPolicy(ctx context.Context, req *connectrpc.Request[controlv1.SetPolicyRequest]) (*connectrpc.Response[controlv1.SetPolicyResponse], error) {
	user, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	var p Policy
	for k, v := range toProto {
		if v == req.Msg.GetPolicy() {
			p = k
		}
	}
	if p == "" {
		return nil, s.status(ctx, "set policy", &InputError{"policy", "not one of POLICY_DEFAULT, ALLOW, ASK, OFF"})
	}
	if err := s.broker.SetPolicy(ctx, user, req.Msg.GetConnector(), req.Msg.GetTool(), p); err != nil {
		return nil, s.status(ctx, "set policy", err)
	}
	return connectrpc.NewResponse(&controlv1.SetPolicyResponse{}), nil
}

// CheckConnector reaches the upstream with the grant.
func (s *Service) CheckConnector(ctx context.Context, req *connectrpc.Request[controlv1.CheckConnectorRequest]) (*connectrpc.Response[controlv1.CheckConnectorResponse], error) {
	user, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	account, c, err := s.broker.Check(ctx, user, req.Msg.GetConnector())
	if err != nil {
		return nil, s.status(ctx, "check", err)
	}
	return connectrpc.NewResponse(&controlv1.CheckConnectorResponse{Account: account, Connector: c.Proto()}), nil
}

// Disconnect deletes a grant; NOT_FOUND when there was none.
func (s *Service) Disconnect(ctx context.Context, req *connectrpc.Request[controlv1.DisconnectRequest]) (*connectrpc.Response[controlv1.DisconnectResponse], error) {
	user, err := s.who(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := s.broker.Disconnect(ctx, user, req.Msg.GetConnector(), DoorApp)
	if err != nil {
		return nil, s.status(ctx, "disconnect", err)
	}
	if !ok {
		return nil, s.status(ctx, "disconnect", fmt.Errorf("%s: %w", req.Msg.GetConnector(), ErrNotFound))
	}
	return connectrpc.NewResponse(&controlv1.DisconnectResponse{Revoked: true}), nil
}
