package agents_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/agents"
	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// check runs g's Check of kind on boxID in a transaction that holds the
// owner's row lock first, as the Boxes service's begin does.
func (e *env) check(g *oauth.Grant, kind, boxID string) error {
	e.t.Helper()
	ctx := context.Background()
	var err error
	pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		if _, err = tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE", g.UserID); err != nil {
			return err
		}
		err = agents.NewCaps(e.db.Pool).Agent(g).Check(ctx, tx, kind, boxID)
		return err
	})
	return err
}

// Contract: a grant's calls reach only its boxes, within max_boxes and
// max_running (starting, running or hibernating); a box of the user or of
// another grant is no such box; a grant revoked since its token was
// checked is refused.
func TestCapsHoldAGrantToItsBoxesAndCaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.signIn("alice")
	_, g := alice.grant("codex", 2, 1)
	_, other := alice.grant("claude", 2, 2)
	own := e.box(e.alice.ID, "main", "running", "")
	theirs := e.box(e.alice.ID, "theirs", "hibernated", other.ID)

	if err := e.check(g, "create", ""); err != nil {
		t.Fatalf("a first create: %v", err)
	}
	running := e.box(e.alice.ID, "a1", "running", g.ID)
	if err := e.check(g, "create", ""); !errors.Is(err, boxes.ErrLimit) || !strings.Contains(err.Error(), "max_running is 1") {
		t.Fatalf("a create with one box running under max_running 1: %v, want max_running", err)
	}
	sleeping := e.box(e.alice.ID, "a2", "hibernated", g.ID)
	if err := e.check(g, "create", ""); !errors.Is(err, boxes.ErrLimit) || !strings.Contains(err.Error(), "max_boxes is 2") {
		t.Fatalf("a third create under max_boxes 2: %v, want max_boxes", err)
	}
	if err := e.check(g, "ensure", sleeping); !errors.Is(err, boxes.ErrLimit) || !strings.Contains(err.Error(), "max_running is 1") {
		t.Fatalf("waking a second box under max_running 1: %v, want max_running", err)
	}
	for _, kind := range []string{"ensure", "hibernate", "save"} {
		if err := e.check(g, kind, running); err != nil {
			t.Fatalf("%s of its running box: %v", kind, err)
		}
	}
	if err := e.check(g, "save", sleeping); err != nil {
		t.Fatalf("save of its hibernated box: %v", err)
	}
	for _, box := range []string{own, theirs, "cb-0000000000000000"} {
		if err := e.check(g, "delete", box); !errors.Is(err, boxes.ErrNotFound) {
			t.Fatalf("a delete of %s, not its box: %v, want no such box", box, err)
		}
	}
	if err := e.check(other, "ensure", theirs); err != nil {
		t.Fatalf("the other grant waking its own box: %v", err)
	}
	if err := e.grants.Revoke(context.Background(), e.alice.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.check(g, "hibernate", running); !errors.Is(err, boxes.ErrState) || !strings.Contains(err.Error(), "has ended") {
		t.Fatalf("a call of a revoked grant: %v, want refused as ended", err)
	}
}

// Two creates of one grant at once under max_boxes 1, each in its own
// transaction under the owner's row lock as the Boxes service runs them:
// the second waits for the first's commit, then sees its box and is
// refused (without the lock it checked at once, before the first box was
// committed, and passed too).
func TestCapsAreRaceFreeUnderTheOwnersRowLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, g := e.signIn("alice").grant("codex", 1, 1)
	ctx := context.Background()
	caps := agents.NewCaps(e.db.Pool)
	// create is begin's order: the owner's row lock, the grant's check,
	// the insert, the box recorded; then hold, then commit.
	create := func(hold func()) error {
		return pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE", g.UserID); err != nil {
				return err
			}
			a := caps.Agent(g)
			if err := a.Check(ctx, tx, "create", ""); err != nil {
				return err
			}
			b := make([]byte, 8)
			rand.Read(b)
			id := "cb-" + hex.EncodeToString(b)
			if _, err := tx.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed, agent)
 VALUES ($1, $2, $3, 'cbdesk:v23-base', 'starting', 'local', $4, true)`, id, g.UserID, "b"+hex.EncodeToString(b), make([]byte, 32)); err != nil {
				return err
			}
			if err := a.Inserted(ctx, tx, id); err != nil {
				return err
			}
			hold()
			return nil
		})
	}
	second := make(chan error, 1)
	first := create(func() {
		go func() { second <- create(func() {}) }()
		wait.Eventually(t, 10*time.Second, "the second create waits for the owner's row lock", func() (bool, string) {
			var waiting int
			err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
			return err == nil && waiting > 0, fmt.Sprintf("%d waiting, %v", waiting, err)
		})
	})
	if first != nil {
		t.Fatalf("the first create: %v", first)
	}
	if err := <-second; !errors.Is(err, boxes.ErrLimit) || !strings.Contains(err.Error(), "max_boxes is 1") {
		t.Fatalf("the second create at once: %v, want refused by max_boxes", err)
	}
	if mine, err := caps.Boxes(ctx, g.ID); err != nil || len(mine) != 1 {
		t.Fatalf("the grant holds %v (%v), want one box", mine, err)
	}
}
