package mcp

import (
	"context"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Schedules is what the schedule tools call: cocoonbox.control.v1.Schedules
// (api/wake's Service), as the caller (Contract: Scheduled wake;
// docs/wake.md).
type Schedules interface {
	SetSchedule(context.Context, *connect.Request[controlv1.SetScheduleRequest]) (*connect.Response[controlv1.BoxSchedule], error)
	ListSchedules(context.Context, *connect.Request[controlv1.ListSchedulesRequest]) (*connect.Response[controlv1.ListSchedulesResponse], error)
	ClearSchedules(context.Context, *connect.Request[controlv1.ClearSchedulesRequest]) (*connect.Response[controlv1.ClearSchedulesResponse], error)
}

// integer is the integer argument name (0 when absent; the schema made it
// a whole number).
func (c *call) integer(name string) int64 { f, _ := c.args[name].(float64); return int64(f) }

// scheduledBox is the box the call's box argument names (the caller's
// first without one), within an agent's grant: its name or id, which the
// Schedules service resolves for the caller.
func (h *Handler) scheduledBox(c *call) (string, error) {
	if h.deps.Schedules == nil {
		return "", refuse("scheduled wake is not served by this api")
	}
	box, err := h.boxArg(c)
	if err != nil || box != "" {
		return box, err
	}
	st, err := h.status(c, box)
	if err != nil {
		return "", err
	}
	if st.Box == nil {
		return "", refuse("you have no box to schedule: box_create makes one")
	}
	return st.Box.BoxId, nil
}

func (h *Handler) boxScheduleSet(c *call) (any, error) {
	id, err := h.scheduledBox(c)
	if err != nil {
		return nil, err
	}
	req := &controlv1.SetScheduleRequest{Box: id, Cron: c.str("cron"), TimeZone: c.str("time_zone"), KeepUpSeconds: c.integer("keep_up_seconds")}
	if at := c.str("at"); at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return nil, refuse("at: %q is not an RFC 3339 time (e.g. 2026-12-08T07:30:00+01:00)", at)
		}
		req.AtMs = t.UnixMilli()
	}
	s, err := msg(h.deps.Schedules.SetSchedule(c.ctx, connect.NewRequest(req)))
	if err != nil {
		return nil, err
	}
	return map[string]any{"schedule_id": s.Id, "box_id": s.BoxId, "next_at_ms": s.NextAtMs}, nil
}

func (h *Handler) boxScheduleList(c *call) (any, error) {
	id, err := h.scheduledBox(c)
	if err != nil {
		return nil, err
	}
	l, err := msg(h.deps.Schedules.ListSchedules(c.ctx, connect.NewRequest(&controlv1.ListSchedulesRequest{Box: id})))
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, s := range l.Schedules {
		out = append(out, map[string]any{"schedule_id": s.Id, "box_id": s.BoxId, "at_ms": s.AtMs, "cron": s.Cron, "time_zone": s.TimeZone,
			"keep_up_seconds": s.KeepUpSeconds, "next_at_ms": s.NextAtMs, "sleep_at_ms": s.SleepAtMs})
	}
	return map[string]any{"schedules": out}, nil
}

func (h *Handler) boxScheduleClear(c *call) (any, error) {
	id, err := h.scheduledBox(c)
	if err != nil {
		return nil, err
	}
	n, err := msg(h.deps.Schedules.ClearSchedules(c.ctx, connect.NewRequest(&controlv1.ClearSchedulesRequest{Box: id, Id: c.integer("schedule_id")})))
	if err != nil {
		return nil, err
	}
	return map[string]any{"box_id": id, "cleared": n.Cleared}, nil
}
