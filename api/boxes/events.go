package boxes

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// lockKey is the advisory lock key of one thing ("box", "instance") of
// this package: the first 8 bytes of a SHA-256, so keys of other packages
// and kinds do not meet.
func lockKey(kind, id string) int64 {
	sum := sha256.Sum256([]byte("cocoonbox boxes " + kind + " " + id))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// notifier wakes the watchers of a user when a NOTIFY on Channel names
// them, and every watcher after a lost LISTEN connection comes back.
type notifier struct {
	mu    sync.Mutex
	users map[string]chan struct{}
	done  chan struct{}
}

// changed answers a channel closed at the user's next notification; get it
// before reading the log, so nothing committed after the read is missed.
func (n *notifier) changed(userID string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.users[userID]
	if !ok {
		ch = make(chan struct{})
		n.users[userID] = ch
	}
	return ch
}

// fire wakes the user's watchers ("" for everyone's).
func (n *notifier) fire(userID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for u, ch := range n.users {
		if userID == "" || u == userID {
			close(ch)
			delete(n.users, u)
		}
	}
}

func (n *notifier) wait() { <-n.done }

// listen LISTENs on Channel until ctx ends, reconnecting (backing off up
// to 5 s) and waking every watcher after each reconnect.
func listen(ctx context.Context, url string, log *slog.Logger) (*notifier, error) {
	n := &notifier{users: map[string]chan struct{}{}, done: make(chan struct{})}
	connect := func() (*pgx.Conn, error) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("boxes: connect for LISTEN: %w", err)
		}
		if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("boxes: LISTEN: %w", err)
		}
		return conn, nil
	}
	conn, err := connect()
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(n.done)
		backoff := 100 * time.Millisecond
		for {
			for conn != nil {
				note, err := conn.WaitForNotification(ctx)
				if err != nil {
					if ctx.Err() == nil {
						log.Warn("boxes: lost the LISTEN connection; reconnecting", "err", err)
					}
					conn.Close(context.Background())
					conn = nil
					break
				}
				backoff = 100 * time.Millisecond
				n.fire(note.Payload)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			if conn, err = connect(); err == nil {
				n.fire("")
			} else if ctx.Err() == nil {
				log.Warn("boxes: LISTEN reconnect failed", "err", err, "retry_in", backoff)
			}
		}
	}()
	return n, nil
}

// Watch streams the user's box events with seq > after (of one box when
// box names one: its id or name; "" for every box of the user), then each
// new one as any api writes it, in seq order, until ctx ends; the channel
// closes then, or when the database cannot be read (watch again from the
// last seq seen: nothing is missed). A box id of a deleted box still
// streams its events. Errors: ErrInvalid, ErrNotFound for box.
func (s *Service) Watch(ctx context.Context, userID, box string, after uint64) (<-chan *controlv1.BoxEvent, error) {
	boxID := ""
	if box != "" {
		b, err := findBox(ctx, s.pool, userID, box, false)
		switch {
		case err == nil:
			boxID = b.ID
		case IsBoxID(box):
			boxID = box
		default:
			return nil, err
		}
	}
	out := make(chan *controlv1.BoxEvent, 16)
	go func() {
		defer close(out)
		for {
			changed := s.events.changed(userID)
			events, err := readEvents(ctx, s.pool, userID, boxID, after, 256)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("boxes: watch: read events", "user", userID, "err", err)
				}
				return
			}
			for _, e := range events {
				select {
				case out <- e:
					after = e.Seq
				case <-ctx.Done():
					return
				}
			}
			if len(events) == 256 {
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// WaitOperation follows the user's operation opID (op- and 16 hex) from
// its start: each calls fn with every step it took and takes, in order
// (its phases, the last one done or failed), and WaitOperation answers
// that last step. An operation that has ended already is replayed. Errors:
// ErrInvalid, ErrNotFound (no such operation of this user), ctx's error.
func (s *Service) WaitOperation(ctx context.Context, userID, opID string, each func(*controlv1.Operation)) (*controlv1.Operation, error) {
	if !opIDRule.MatchString(opID) {
		return nil, invalid("operation_id", "%q must be op- and 16 lowercase hex digits", opID)
	}
	op, err := findOp(ctx, s.pool, "id = $1 AND user_id = $2", opID, userID)
	if err != nil {
		return nil, err
	}
	if op == nil {
		return nil, fmt.Errorf("operation %s: %w", opID, ErrNotFound)
	}
	first, err := s.eventsBefore(ctx, opID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.Watch(ctx, userID, op.BoxID, first)
	if err != nil {
		return nil, err
	}
	for e := range events {
		step := e.GetOperation()
		if step.GetOperationId() != opID {
			continue
		}
		if each != nil {
			each(step)
		}
		if step.Phase == controlv1.Phase_PHASE_DONE || step.Phase == controlv1.Phase_PHASE_FAILED {
			return step, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("operation %s: the event log could not be read: %w", opID, ErrUnavailable)
}

// eventsBefore is the cursor that replays operation opID from its first
// step: the seq before that step (OperationResponse.events_after).
func (s *Service) eventsBefore(ctx context.Context, opID string) (uint64, error) {
	var first int64
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(min(seq), 1) - 1 FROM box_events WHERE operation_id = $1", opID).Scan(&first); err != nil {
		return 0, fmt.Errorf("operation %s: %w", opID, err)
	}
	return uint64(first), nil
}
