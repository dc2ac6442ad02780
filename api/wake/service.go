package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// Service is cocoonbox.control.v1.Schedules (schedules.proto) on a Store.
type Service struct {
	st   *Store
	user func(context.Context) (string, bool)
}

var _ controlv1connect.SchedulesHandler = (*Service)(nil)

// NewService serves st's schedules to the caller user answers.
func NewService(st *Store, user func(context.Context) (string, bool)) *Service {
	return &Service{st: st, user: user}
}

// code is the connect error of an error of this package.
func code(err error) error {
	switch {
	case errors.Is(err, ErrInvalid):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	}
	return connect.NewError(connect.CodeInternal, errors.New("the schedules could not be read or written"))
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

func message(sc Schedule) *controlv1.BoxSchedule {
	return &controlv1.BoxSchedule{Id: sc.ID, BoxId: sc.BoxID, AtMs: ms(sc.At), Cron: sc.Cron, TimeZone: sc.TimeZone,
		KeepUpSeconds: int64(sc.KeepUp / time.Second), NextAtMs: ms(sc.Next), SleepAtMs: ms(sc.SleepAt)}
}

// SetSchedule implements Schedules.SetSchedule.
func (s *Service) SetSchedule(ctx context.Context, req *connect.Request[controlv1.SetScheduleRequest]) (*connect.Response[controlv1.BoxSchedule], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	sp := Spec{Cron: m.Cron, TimeZone: m.TimeZone, KeepUp: time.Duration(m.KeepUpSeconds) * time.Second}
	if m.KeepUpSeconds < 0 || m.KeepUpSeconds > int64(MaxKeepUp/time.Second) {
		return nil, code(fmt.Errorf("%w: keep_up_seconds %d is not 0 to %d", ErrInvalid, m.KeepUpSeconds, int64(MaxKeepUp/time.Second)))
	}
	if m.AtMs != 0 {
		sp.At = time.UnixMilli(m.AtMs)
	}
	id, err := s.st.BoxID(ctx, user, m.Box)
	if err != nil {
		return nil, code(err)
	}
	sc, err := s.st.Set(ctx, user, id, sp)
	if err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(message(sc)), nil
}

// ListSchedules implements Schedules.ListSchedules.
func (s *Service) ListSchedules(ctx context.Context, req *connect.Request[controlv1.ListSchedulesRequest]) (*connect.Response[controlv1.ListSchedulesResponse], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	id := ""
	if req.Msg.Box != "" {
		if id, err = s.st.BoxID(ctx, user, req.Msg.Box); err != nil {
			return nil, code(err)
		}
	}
	list, err := s.st.List(ctx, user, id)
	if err != nil {
		return nil, code(err)
	}
	out := &controlv1.ListSchedulesResponse{}
	for _, sc := range list {
		out.Schedules = append(out.Schedules, message(sc))
	}
	return connect.NewResponse(out), nil
}

// ClearSchedules implements Schedules.ClearSchedules.
func (s *Service) ClearSchedules(ctx context.Context, req *connect.Request[controlv1.ClearSchedulesRequest]) (*connect.Response[controlv1.ClearSchedulesResponse], error) {
	user, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := s.st.BoxID(ctx, user, req.Msg.Box)
	if err != nil {
		return nil, code(err)
	}
	n, err := s.st.Clear(ctx, user, id, req.Msg.Id)
	if err != nil {
		return nil, code(err)
	}
	return connect.NewResponse(&controlv1.ClearSchedulesResponse{Cleared: n}), nil
}
