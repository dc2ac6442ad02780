package connect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ApprovalTimeout is how long a call of an ask tool waits for the user's
// answer before it is answered as denied.
const ApprovalTimeout = 5 * time.Minute

// Decision is the user's answer to a pending approval (Contract: Connect,
// Console calls).
type Decision string

// The decisions: once lets this call through, always sets the tool's
// policy to allow and lets it through, deny refuses it.
const (
	DecisionOnce   Decision = "once"
	DecisionAlways Decision = "always"
	DecisionDeny   Decision = "deny"
)

// Approval is a call of an ask tool waiting for the user.
type Approval struct {
	ID        string    `json:"id"`
	Connector string    `json:"connector"`
	Tool      string    `json:"tool"`
	Door      string    `json:"door"`
	Created   time.Time `json:"created"`

	user   string
	answer chan Decision
}

// approvals are the pending approvals on this api: a call waits on the
// api that serves it, so its approval lives there (docs/connect.md says
// what that means with replicas).
type approvals struct {
	mu   sync.Mutex
	byID map[string]*Approval
}

// await registers an approval of user's call and waits for its answer;
// ctx's end or ApprovalTimeout answer "" (unanswered, refused as a deny
// is, audited as approval_required).
func (a *approvals) await(ctx context.Context, user, connector, tool string) Decision {
	var raw [16]byte
	rand.Read(raw[:])
	ap := &Approval{ID: hex.EncodeToString(raw[:]), Connector: connector, Tool: tool, Door: "mcp",
		Created: time.Now(), user: user, answer: make(chan Decision, 1)}
	a.mu.Lock()
	if a.byID == nil {
		a.byID = map[string]*Approval{}
	}
	a.byID[ap.ID] = ap
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.byID, ap.ID)
		a.mu.Unlock()
	}()
	t := time.NewTimer(ApprovalTimeout)
	defer t.Stop()
	select {
	case d := <-ap.answer:
		return d
	case <-ctx.Done():
	case <-t.C:
	}
	return ""
}

// Pending answers user's pending approvals, oldest first.
func (b *Broker) Pending(user string) []Approval {
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	out := []Approval{}
	for _, ap := range b.pending.byID {
		if ap.user == user {
			out = append(out, *ap)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Answer answers one of user's pending approvals; another user's, an
// answered or an unknown one is ErrNotFound, a decision other than once,
// always or deny an *InputError.
func (b *Broker) Answer(user, id string, d Decision) error {
	if d != DecisionOnce && d != DecisionAlways && d != DecisionDeny {
		return &InputError{"decision", fmt.Sprintf("%q is not once, always or deny", d)}
	}
	b.pending.mu.Lock()
	ap := b.pending.byID[id]
	if ap == nil || ap.user != user {
		b.pending.mu.Unlock()
		return fmt.Errorf("approval %s: %w", id, ErrNotFound)
	}
	delete(b.pending.byID, id)
	b.pending.mu.Unlock()
	ap.answer <- d
	return nil
}
