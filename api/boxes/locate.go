package boxes

import (
	"context"
	"fmt"
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
