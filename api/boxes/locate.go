package boxes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// Locate is the Service's Locate for a caller acting inside a box
// (Session.Exec, see package session): its errors wrap this package's
// sentinels, and an Unavailable handler answers ErrUnavailable with why.
func (h *Handler) Locate(ctx context.Context, userID, box string) (Located, error) {
	if h.down != nil {
		return Located{}, fmt.Errorf("%w: %w", ErrUnavailable, h.down)
	}
	return h.s.Locate(ctx, userID, box)
}

// Left is the Service's Left; an Unavailable handler has no boxes, so its
// channel never fires.
func (h *Handler) Left(ctx context.Context, userID, boxID string) <-chan string {
	if h.down != nil {
		return nil
	}
	return h.s.Left(ctx, userID, boxID)
}

// Left answers a channel that gets the state box boxID (one of userID's)
// takes when it stops running ("hibernating", "hibernated", "stopped",
// "absent" when deleted, ...), once, on any api, until ctx ends: what
// ends a long call that needs the box up, such as an open screen, when the
// box is hibernated under it (docs/screen.md). It reads the box's last
// event first and its state next, so a change between Locate and Left is
// seen by the one or the other. A database that cannot be read leaves
// the channel silent (logged): the call goes on as it would without it.
func (s *Service) Left(ctx context.Context, userID, boxID string) <-chan string {
	out := make(chan string, 1)
	var after int64
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM box_events WHERE user_id = $1 AND box_id = $2",
		userID, boxID).Scan(&after); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("boxes: left: read the box's last event", "box", boxID, "err", err)
		}
		return out
	}
	b, err := findBox(ctx, s.pool, userID, boxID, false)
	switch {
	case errors.Is(err, ErrNotFound):
		out <- Absent
		return out
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("boxes: left: read the box", "box", boxID, "err", err)
		}
		return out
	case b.State != Running:
		out <- b.State
		return out
	}
	events, err := s.Watch(ctx, userID, boxID, uint64(after))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("boxes: left: watch the box", "box", boxID, "err", err)
		}
		return out
	}
	go func() {
		for e := range events {
			if st, ok := e.Event.(*controlv1.BoxEvent_State); ok && st.State != controlv1.BoxState_BOX_STATE_RUNNING {
				out <- strings.ToLower(strings.TrimPrefix(st.State.String(), "BOX_STATE_"))
				return
			}
		}
	}()
	return out
}
