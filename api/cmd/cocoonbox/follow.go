package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// reconnectTries bounds the Events calls in a row that end without an
// event (the api gone, the connection cut) before follow gives up.
const reconnectTries = 20

// follow reads the box's events after the cursor after (the call's
// OperationResponse.events_after, just before op's first step) until op
// ends (phase done or failed), and answers its last state. Events keeps
// every event after the cursor, so none of op's is missed however late the
// stream opens, and a box's older log is not read again; when a stream
// drops, the next one asks for what came after the last seq seen.
// Contract: Boxes (api) ↔ sandboxd (events by cursor).
func follow(ctx context.Context, c controlv1connect.BoxesClient, boxID string, op *controlv1.Operation, after uint64, p *progress) (*controlv1.Operation, error) {
	p.operation(nil, op)
	if ended(op) {
		return op, nil // a repeated request id whose operation is over
	}
	cursor := after
	wait := 100 * time.Millisecond
	for fails := 0; ; {
		before := cursor
		end, err := followOnce(ctx, c, boxID, op.OperationId, &cursor, p)
		switch {
		case end != nil:
			p.finish()
			return end, nil
		case ctx.Err() != nil:
			p.finish()
			return nil, ctx.Err()
		case err != nil && !client.Retryable(err):
			p.finish()
			return nil, err
		}
		if cursor != before {
			fails, wait = 0, 100*time.Millisecond // it delivered before it stopped
		}
		if fails++; fails > reconnectTries {
			p.finish()
			return nil, fmt.Errorf("following operation %s: the event stream failed %d times in a row (last: %v)", op.OperationId, reconnectTries, err)
		}
		p.reconnecting(cursor, err)
		select {
		case <-ctx.Done():
			p.finish()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 3*time.Second)
	}
}

// followOnce is one Events call from *cursor, which it moves past each
// event. It answers op's last state once it ends, else why the stream
// stopped (nil for a clean end).
func followOnce(ctx context.Context, c controlv1connect.BoxesClient, boxID, opID string, cursor *uint64, p *progress) (*controlv1.Operation, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Events(ctx, connect.NewRequest(&controlv1.BoxEventsRequest{After: *cursor, Box: boxID}))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg()
		*cursor = ev.Seq
		if op := ev.GetOperation(); op != nil {
			if op.OperationId != opID {
				continue
			}
			p.operation(ev, op)
			if ended(op) {
				return op, nil
			}
			continue
		}
		p.stateChange(ev)
	}
	if err := stream.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	return nil, nil
}

func ended(op *controlv1.Operation) bool {
	return op.Phase == controlv1.Phase_PHASE_DONE || op.Phase == controlv1.Phase_PHASE_FAILED
}
