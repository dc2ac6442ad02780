//go:build booted

package boxes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/vault"
	"github.com/cocoonbox/cocoonbox/tests/box"
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
	_, err := e.db.Pool.Exec(context.Background(), "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE NOWAIT", userID)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" {
		return true, nil
	}
	return false, err
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

// capRecorder is the package's supervisor recording each tenant cap set.
type capRecorder struct {
	sandbox.Supervisor
	mu   sync.Mutex
	caps []int
}

func (c *capRecorder) SetTenantCap(ctx context.Context, tenant string, maxClaims int) error {
	c.mu.Lock()
	c.caps = append(c.caps, maxClaims)
	c.mu.Unlock()
	return c.Supervisor.SetTenantCap(ctx, tenant, maxClaims)
}

func (c *capRecorder) last() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.caps) == 0 {
		return -1
	}
	return c.caps[len(c.caps)-1]
}

// Must show (Contract: Agent boxes and the user's limits; Agent boxes of a
// user): a user on max_boxes 1 and max_running 1 keeps main running while
// a grant creates two boxes (neither counts toward max_boxes, their
// creates skip the running limit); the user's own second box is still
// refused by max_boxes naming the 1 box they hold; with max_agent_boxes 2
// a third agent box is refused naming the cap; an agent box wakes while
// main runs, and main wakes while the agent boxes run (they hold none of
// the running limit). The tenant cap is max_boxes + min(agent boxes,
// max_agent_boxes) + 1 after each create and delete: with the old
// max_boxes + 1 the supervisor refuses the second agent box's machine.
func TestAgentBoxesAreOutsideTheUsersLimitsAndCountInTheTenantCap(t *testing.T) {
	t.Parallel()
	rec := &capRecorder{Supervisor: sup}
	e := newEnvWith(t, func(c *Config) { c.Hosts = map[string]sandbox.Supervisor{"local": rec} })
	ctx := context.Background()
	alice := e.user("alice", 1, 1)
	if _, err := e.db.Pool.Exec(ctx, "UPDATE users SET max_agent_boxes = 2 WHERE id = $1", alice); err != nil {
		t.Fatal(err)
	}
	actx := WithAgent(ctx, &Agent{GrantID: "grant-1"})
	e.create(alice, "main")
	if got := rec.last(); got != 2 {
		t.Fatalf("tenant cap with main alone: %d; want 1 + 0 + 1", got)
	}
	agentCreate := func(name string) (*Box, error) {
		b, op, err := e.s.Create(actx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: name, Image: v1})
		if err == nil {
			e.wait(alice, op)
		}
		return b, err
	}
	for i, name := range []string{"agent-one", "agent-two"} {
		if _, err := agentCreate(name); err != nil {
			t.Fatalf("the grant's create of %s beside main: %v", name, err)
		}
		if got, want := rec.last(), 1+(i+1)+1; got != want {
			t.Fatalf("tenant cap after %s: %d; want %d", name, got, want)
		}
	}
	if _, err := agentCreate("agent-three"); !errors.Is(err, ErrLimit) ||
		!strings.Contains(err.Error(), "max_agent_boxes: the user's agents hold 2 boxes and max_agent_boxes is 2") {
		t.Fatalf("a third agent box under max_agent_boxes 2: %v", err)
	}
	_, _, err := e.s.Create(ctx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "second", Image: v1})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "max_boxes: the user holds 1 boxes and max_boxes is 1") {
		t.Fatalf("the user's own second box: %v; want max_boxes naming the 1 box they hold", err)
	}

	// Wakes: an agent box beside the running main, then main beside the
	// running agent boxes.
	e.do(alice, e.s.Hibernate, "agent-one")
	e.do(alice, e.s.Ensure, "agent-one") // under no agent: the mark decides, not the caller
	e.do(alice, e.s.Hibernate, "main")
	e.do(alice, e.s.Ensure, "main")

	// A deleted agent box lowers the cap; max_agent_boxes lowered below what
	// the agents hold caps their count in it (seen at main's delete).
	e.do(alice, e.s.Delete, "agent-two")
	if got := rec.last(); got != 3 {
		t.Fatalf("tenant cap after an agent box's delete: %d; want 1 + 1 + 1", got)
	}
	if _, err := agentCreate("agent-two"); err != nil {
		t.Fatalf("an agent box again after the delete: %v", err)
	}
	if _, err := e.db.Pool.Exec(ctx, "UPDATE users SET max_agent_boxes = 1 WHERE id = $1", alice); err != nil {
		t.Fatal(err)
	}
	e.do(alice, e.s.Delete, "main")
	if got := rec.last(); got != 3 {
		t.Fatalf("tenant cap with 2 agent boxes and max_agent_boxes 1: %d; want 1 + min(2, 1) + 1", got)
	}
}

// Must show (Contract: No owner credentials in agent boxes): beside a user
// box of the same owner that holds the owner's key (its record in
// /run/silkd.env, its value in the supervisor's host-only entry), an agent
// box holds none of it: not at provisioning (a key added before its
// create), not after a key is added (the push to every machine of the
// owner), not after a wake (run under no agent: the box's mark decides,
// and it stays after the grant ends); COCOONBOX_VAULT is there, empty.
// Without the mark's check in claimEntries the agent box gets the first
// key at its create.
func TestAnAgentBoxGetsNoOwnerKeyAtCreateAfterAKeyIsAddedAndAfterAWake(t *testing.T) {
	e, store, _, _ := keysEnv(t)
	ctx := context.Background()
	alice := e.user("alice", 1, 1)
	own, op, err := e.s.Create(ctx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "own", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(alice, op)
	add := func(name, value string) string {
		k, err := store.Add(ctx, alice, vault.ActorCLI, name, vault.Spec{Hosts: []string{"api.openai.com"}}, vault.NewSecret(value))
		if err != nil {
			t.Fatal(err)
		}
		box.Eventually(t, 30*time.Second, name+" on the user's own box", func() (bool, string) {
			got := sh(t, own.ID, "cat /run/silkd.env")
			return strings.Contains(got, name+"="+k.Placeholder) && len(hostEntries(t, own.ID)) > 0, got
		})
		return k.Placeholder
	}
	first := add("OPENAI_API_KEY", "sk-proj-FIRST-0123456789abcdef")

	ab, op, err := e.s.Create(WithAgent(ctx, &Agent{GrantID: "grant-1"}), Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "agents", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(alice, op)
	none := func(when string, placeholders ...string) {
		t.Helper()
		env := sh(t, ab.ID, "cat /run/silkd.env")
		if !strings.Contains(env, "COCOONBOX_VAULT=") {
			t.Fatalf("%s: the agent box's /run/silkd.env has no COCOONBOX_VAULT entry:\n%s", when, env)
		}
		for _, p := range placeholders {
			if strings.Contains(env, p) {
				t.Fatalf("%s: the agent box's /run/silkd.env holds the owner's key %s:\n%s", when, p, env)
			}
		}
		if es := hostEntries(t, ab.ID); len(es) != 0 {
			t.Fatalf("%s: the agent box has host-only entries %v", when, es)
		}
	}
	none("at its create", first)

	second := add("ANTHROPIC_API_KEY", "sk-ant-SECOND-0123456789abcdef")
	none("after a key is added", first, second)

	e.do(alice, e.s.Hibernate, "agents")
	e.do(alice, e.s.Ensure, "agents")
	none("after a wake", first, second)
	if got := sh(t, own.ID, "cat /run/silkd.env"); !strings.Contains(got, first) || !strings.Contains(got, second) {
		t.Fatalf("the user's own box lost the keys:\n%s", got)
	}
	if bs, err := e.s.WithoutKeys(ctx, alice); err != nil || len(bs) != 0 {
		t.Fatalf("WithoutKeys lists %v (%v); an agent box is not a box waiting for an upgrade", bs, err)
	}
}
