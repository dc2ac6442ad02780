package mcp

import (
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// await follows op to its end. When the call carries a progress token it
// sends one notifications/progress per step of the operation (its
// OperationEvents, in order): progress counts the steps from 1, message
// is the step's phase (with "N bytes" once total_bytes is known, "failed:
// why" for a failure); without a token it sends nothing. It answers the
// last step and the last total_bytes seen in phase saving or after; an
// operation that failed is a refusal naming why.
//
// A client gone mid-operation stops nothing: the operation runs in the
// api, and a progress notification that cannot be sent is dropped.
//
// Contract: Control MCP, progress.
func (h *Handler) await(c *call, op *controlv1.Operation) (*controlv1.Operation, int64, error) {
	token := c.req.Params.GetProgressToken()
	steps, bytes := 0, int64(0)
	last, err := h.deps.Follow(c.ctx, c.user, op.OperationId, func(o *controlv1.Operation) {
		steps++
		if o.TotalBytes > 0 && (o.Phase == controlv1.Phase_PHASE_SAVING || o.Phase == controlv1.Phase_PHASE_DONE) {
			bytes = o.TotalBytes
		}
		if token == nil {
			return
		}
		p := &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(steps), Message: stepMessage(o)}
		if err := c.req.Session.NotifyProgress(c.ctx, p); err != nil {
			h.deps.Log.DebugContext(c.ctx, "control MCP: progress not sent", "operation", o.OperationId, "err", err)
		}
	})
	if err != nil {
		return op, bytes, fmt.Errorf("follow operation %s: %w", op.OperationId, err)
	}
	if last.Phase == controlv1.Phase_PHASE_FAILED {
		return last, bytes, refuse("the %s of box %s failed: %s (operation %s)", last.Kind, last.BoxId, last.Error, last.OperationId)
	}
	return last, bytes, nil
}

// stepMessage is a progress notification's message for step o.
func stepMessage(o *controlv1.Operation) string {
	switch {
	case o.Phase == controlv1.Phase_PHASE_FAILED:
		return "failed: " + o.Error
	case o.TotalBytes > 0:
		return fmt.Sprintf("%s %d bytes", phase(o.Phase), o.TotalBytes)
	}
	return phase(o.Phase)
}
