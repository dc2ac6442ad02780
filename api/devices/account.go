package devices

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// Caller is who made a gRPC call: the user, and the device whose token it
// was ("" for the personal token).
type Caller struct {
	UserID, DeviceID string
}

// Account is cocoonbox.control.v1.Account. The token check (package tokens'
// interceptor) runs before it and puts the caller in the context, so a call
// without a good token never gets here.
type Account struct {
	store  *Store
	caller func(context.Context) (Caller, bool)
	log    *slog.Logger
}

var _ controlv1connect.AccountHandler = (*Account)(nil)

// NewAccount is the Account service of store; caller reads the context's caller.
func NewAccount(store *Store, caller func(context.Context) (Caller, bool), log *slog.Logger) *Account {
	return &Account{store: store, caller: caller, log: log}
}

func (a *Account) who(ctx context.Context) (Caller, error) {
	c, ok := a.caller(ctx)
	if !ok {
		return Caller{}, connect.NewError(connect.CodeUnauthenticated, errors.New("send the personal token or a device token as Bearer"))
	}
	return c, nil
}

// status is an error of the store as a connect code, at this one edge.
func (a *Account) status(ctx context.Context, what string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return connect.NewError(connect.CodeNotFound, err)
	}
	a.log.ErrorContext(ctx, what+" failed", "err", err)
	return connect.NewError(connect.CodeInternal, errors.New(what+" failed; try again"))
}

func (a *Account) devices(ctx context.Context, c Caller) ([]*controlv1.Device, error) {
	list, err := a.store.List(ctx, c.UserID)
	if err != nil {
		return nil, a.status(ctx, "list devices", err)
	}
	out := make([]*controlv1.Device, 0, len(list))
	for _, d := range list {
		pd := &controlv1.Device{Id: d.ID, Client: d.Client, Label: d.Label,
			CreatedAt: timestamppb.New(d.CreatedAt), Current: d.ID == c.DeviceID}
		if d.UsedAt != nil {
			pd.UsedAt = timestamppb.New(*d.UsedAt)
		}
		out = append(out, pd)
	}
	return out, nil
}

// ListDevices answers the console's list plus current.
func (a *Account) ListDevices(ctx context.Context, _ *connect.Request[controlv1.ListDevicesRequest]) (*connect.Response[controlv1.ListDevicesResponse], error) {
	c, err := a.who(ctx)
	if err != nil {
		return nil, err
	}
	list, err := a.devices(ctx, c)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&controlv1.ListDevicesResponse{Devices: list}), nil
}

// RevokeDevice revokes one of the caller's devices; NOT_FOUND for another
// user's device or one already gone.
func (a *Account) RevokeDevice(ctx context.Context, req *connect.Request[controlv1.RevokeDeviceRequest]) (*connect.Response[controlv1.RevokeDeviceResponse], error) {
	c, err := a.who(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.store.Revoke(ctx, c.UserID, req.Msg.DeviceId); err != nil {
		return nil, a.status(ctx, "revoke device", err)
	}
	return connect.NewResponse(&controlv1.RevokeDeviceResponse{}), nil
}

// RevokeToken revokes the caller's personal token; device tokens stay.
func (a *Account) RevokeToken(ctx context.Context, _ *connect.Request[controlv1.RevokeTokenRequest]) (*connect.Response[controlv1.RevokeTokenResponse], error) {
	c, err := a.who(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.store.RevokePersonal(ctx, c.UserID); err != nil {
		return nil, a.status(ctx, "revoke the personal token", err)
	}
	return connect.NewResponse(&controlv1.RevokeTokenResponse{}), nil
}

// SignOutEverywhere ends every sign-in of the caller, the calling one too.
func (a *Account) SignOutEverywhere(ctx context.Context, _ *connect.Request[controlv1.SignOutEverywhereRequest]) (*connect.Response[controlv1.SignOutEverywhereResponse], error) {
	c, err := a.who(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.store.SignOutEverywhere(ctx, c.UserID); err != nil {
		return nil, a.status(ctx, "sign out everywhere", err)
	}
	return connect.NewResponse(&controlv1.SignOutEverywhereResponse{}), nil
}

// WatchDevices sends the list now and after each change of the caller's
// devices. It ends with the call's context, which the token check cancels
// when the caller's token is revoked.
func (a *Account) WatchDevices(ctx context.Context, _ *connect.Request[controlv1.WatchDevicesRequest], stream *connect.ServerStream[controlv1.WatchDevicesResponse]) error {
	c, err := a.who(ctx)
	if err != nil {
		return err
	}
	changes, stop := a.store.hub.watch(c.UserID)
	defer stop()
	for {
		list, err := a.devices(ctx, c)
		if err != nil {
			return err
		}
		if err := stream.Send(&controlv1.WatchDevicesResponse{Devices: list}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			// The token check ends a revoked token's calls with its own
			// UNAUTHENTICATED cause; a shutdown or the client's cancel is CANCELED.
			var ce *connect.Error
			if cause := context.Cause(ctx); errors.As(cause, &ce) {
				return ce
			}
			return connect.NewError(connect.CodeCanceled, context.Cause(ctx))
		case <-changes:
		}
	}
}
