package boxes

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Agent marks every operation begun under ctx as an OAuth grant's
// (Contract: OAuth for agents, agent boxes). A box created under an Agent
// is an agent box: boxes.agent is set by its insert, before its machine
// starts, and stays after the grant ends.
type Agent struct {
	GrantID string
	// Check runs inside the transaction of each operation the grant
	// begins, after the owner's row lock, with the operation's kind
	// ("create", "ensure", ...) and the box id ("" for a create, before the
	// insert). A non-nil error refuses the call with that message (the
	// grant's caps: max_boxes, max_running).
	Check func(ctx context.Context, tx pgx.Tx, kind, boxID string) error
	// Inserted runs in the create's transaction right after the box row is
	// inserted (oauth_boxes).
	Inserted func(ctx context.Context, tx pgx.Tx, boxID string) error
}

type agentKey struct{}

// WithAgent is ctx with a: every operation begun under it is the grant's.
func WithAgent(ctx context.Context, a *Agent) context.Context {
	return context.WithValue(ctx, agentKey{}, a)
}

// AgentFrom is the Agent ctx carries (nil for a user's own call).
func AgentFrom(ctx context.Context) *Agent {
	a, _ := ctx.Value(agentKey{}).(*Agent)
	return a
}

// checkAgent runs the grant's Check for an operation of kind on box boxID
// ("" for a create) inside begin's transaction; a user's own call passes.
func checkAgent(ctx context.Context, tx pgx.Tx, kind, boxID string) error {
	if a := AgentFrom(ctx); a != nil && a.Check != nil {
		return a.Check(ctx, tx, kind, boxID)
	}
	return nil
}
