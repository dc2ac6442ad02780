package boxes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// hookLog records what an Agent's hooks saw.
type hookLog struct {
	mu    sync.Mutex
	calls []string
}

func (h *hookLog) add(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf(format, a...))
}

func (h *hookLog) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// ownerLocked says whether another transaction holds userID's row lock:
// a NOWAIT lock of the row from a connection of its own is refused.
func ownerLocked(e *env, userID string) (bool, error) {
	ctx := context.Background()
	var locked bool
	err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE NOWAIT", userID)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			locked = true
			return nil
		}
		return err
	})
	return locked, err
}

// Must show (Contract: OAuth for agents, agent boxes; INTERFACES.md's
// boxes.Agent): a create under WithAgent runs the grant's Check inside
// begin's transaction, after the owner's row lock, with ("create", ""),
// then its Inserted right after the insert, which sees the row marked
// agent in the same transaction (no other connection sees it yet: the
// machine has not started); the box runs marked and keeps the mark; an
// Ensure under the agent runs Check with ("ensure", the box id). A Check
// or an Inserted that refuses answers its error and writes nothing; a
// user's own call runs no hook. Each check fails without the hook (the
// calls seen) or without the mark (the row's agent column).
func TestAnAgentsCreateIsMarkedAtInsertAndRunsItsHooksInItsTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	alice := e.user("alice", 1, 1)
	log := &hookLog{}
	grant := &Agent{GrantID: "grant-1",
		Check: func(ctx context.Context, tx pgx.Tx, kind, boxID string) error {
			locked, err := ownerLocked(e, alice)
			if err != nil {
				return err
			}
			log.add("check %s %q locked=%v", kind, boxID, locked)
			return nil
		},
		Inserted: func(ctx context.Context, tx pgx.Tx, boxID string) error {
			var agent bool
			if err := tx.QueryRow(ctx, "SELECT agent FROM boxes WHERE id = $1", boxID).Scan(&agent); err != nil {
				return err
			}
			var outside int
			if err := e.db.Pool.QueryRow(ctx, "SELECT count(*) FROM boxes WHERE id = $1", boxID).Scan(&outside); err != nil {
				return err
			}
			log.add("inserted %s agent=%v seen-outside=%d", boxID, agent, outside)
			return nil
		}}
	actx := WithAgent(ctx, grant)
	if AgentFrom(actx) != grant || AgentFrom(ctx) != nil {
		t.Fatal("AgentFrom does not answer what WithAgent set")
	}

	b, op, err := e.s.Create(actx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "agents", Image: v1})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`check create "" locked=true`, "inserted " + b.ID + " agent=true seen-outside=0"}
	if got := log.seen(); !slices.Equal(got, want) {
		t.Fatalf("the hooks saw %q; want %q", got, want)
	}
	if !b.Agent {
		t.Fatal("Create answered the agent's box unmarked")
	}
	e.wait(alice, op)
	if got := e.box(alice, b.ID); !got.Agent || got.State != Running {
		t.Fatalf("the agent's box after its create: agent %v, %s", got.Agent, got.State)
	}

	// An Ensure under the agent names the box to Check; one of the user's
	// own runs no hook.
	if _, _, err := e.s.Ensure(actx, Call{UserID: alice, RequestID: rid(), Box: "agents"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.Ensure(ctx, Call{UserID: alice, RequestID: rid(), Box: "agents"}); err != nil {
		t.Fatal(err)
	}
	want = append(want, `check ensure "`+b.ID+`" locked=true`)
	if got := log.seen(); !slices.Equal(got, want) {
		t.Fatalf("the hooks saw %q; want %q", got, want)
	}

	// A refusing Check or Inserted answers its error and writes nothing.
	refused := errors.New("the grant's max_boxes is 1")
	for name, a := range map[string]*Agent{
		"check":    {GrantID: "grant-2", Check: func(context.Context, pgx.Tx, string, string) error { return refused }},
		"inserted": {GrantID: "grant-3", Inserted: func(context.Context, pgx.Tx, string) error { return refused }},
	} {
		_, _, err := e.s.Create(WithAgent(ctx, a), Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "refused-" + name, Image: v1})
		if !errors.Is(err, refused) || !strings.Contains(err.Error(), "max_boxes is 1") {
			t.Fatalf("a create the %s hook refuses: %v; want its error", name, err)
		}
	}
	var boxes, ops int
	if err := e.db.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM boxes), (SELECT count(*) FROM box_operations WHERE kind = 'create')").Scan(&boxes, &ops); err != nil {
		t.Fatal(err)
	}
	if boxes != 1 || ops != 1 {
		t.Fatalf("after the refused creates: %d boxes and %d create operations; want the agent's one of each", boxes, ops)
	}
}
