package devices

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// reloads records the users this api was told to reload, in order.
type reloads struct {
	mu    sync.Mutex
	users []string
}

func (r *reloads) reload(_ context.Context, userID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users = append(r.users, userID)
	return nil
}

func (r *reloads) count(userID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, u := range r.users {
		if u == userID {
			n++
		}
	}
	return n
}

// personalSignIns ends the personal token in the users table itself; the
// console's sessions have tests of their own in package console.
type personalSignIns struct{}

func (personalSignIns) EndSessions(context.Context, pgx.Tx, string) error { return nil }
func (personalSignIns) RevokePersonal(ctx context.Context, tx pgx.Tx, userID string) error {
	_, err := tx.Exec(ctx, `UPDATE users SET token_sha256 = NULL WHERE id = $1`, userID)
	return err
}

type fixture struct {
	t       *testing.T
	ctx     context.Context
	db      *dbtest.DB
	store   *Store
	reloads *reloads
	users   *users.Store
}

func newFixture(t *testing.T) *fixture {
	t.Parallel()
	db := dbtest.New(t, users.Schema)
	r := &reloads{}
	us := users.NewStore(db.Pool)
	us.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1} // cheap: these tests are not about passwords
	return &fixture{t: t, ctx: context.Background(), db: db, store: NewStore(db.Pool, personalSignIns{}, r.reload), reloads: r, users: us}
}

func (f *fixture) user(name string) string {
	f.t.Helper()
	u, err := f.users.Add(f.ctx, name, "a long enough password", false)
	if err != nil {
		f.t.Fatal(err)
	}
	return u.ID
}

func (f *fixture) device(userID, label string) (id, secret string) {
	f.t.Helper()
	err := pgx.BeginFunc(f.ctx, f.db.Pool, func(tx pgx.Tx) error {
		var err error
		id, secret, err = InTx{}.CreateDevice(f.ctx, tx, userID, "cocoonbox-cli", label)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return id, secret
}

func TestDeviceTokenShapeAndOnlyItsHashStored(t *testing.T) {
	f := newFixture(t)
	alice := f.user("alice")
	id, secret := f.device(alice, "laptop")
	if len(id) != 20 || id[:4] != "dev_" || len(secret) != 67 || secret[:3] != "cb_" {
		t.Fatalf("id %q secret %q", id, secret)
	}
	var stored []byte
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT sha256 FROM user_tokens WHERE id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(secret)); string(stored) != string(sum[:]) {
		t.Fatal("user_tokens does not hold the secret's SHA-256")
	}
}

func TestListIsTheUsersOwnDevices(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	f.device(alice, "laptop")
	f.device(alice, "desk")
	f.device(bob, "bob's")
	list, err := f.store.List(f.ctx, alice)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %v, %v", list, err)
	}
	for _, d := range list {
		if d.Client != "cocoonbox-cli" || d.UsedAt != nil || d.CreatedAt.IsZero() || (d.Label != "laptop" && d.Label != "desk") {
			t.Fatalf("device %+v", d)
		}
	}
}

// Contract: 404 (ErrNotFound) for a device of another user or one already gone.
func TestRevokeOfAnotherUsersDeviceOrOneGoneIsNotFound(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.user("alice"), f.user("bob")
	bobs, _ := f.device(bob, "bob's")
	if err := f.store.Revoke(f.ctx, alice, bobs); !errors.Is(err, ErrNotFound) {
		t.Fatalf("alice revoking bob's device: %v, want ErrNotFound", err)
	}
	if list, _ := f.store.List(f.ctx, bob); len(list) != 1 {
		t.Fatal("bob's device is gone after alice's attempt")
	}
	if err := f.store.Revoke(f.ctx, bob, bobs); err != nil {
		t.Fatal(err)
	}
	if f.reloads.count(bob) != 1 {
		t.Fatalf("this api's index was not reloaded for bob: %v", f.reloads.users)
	}
	if err := f.store.Revoke(f.ctx, bob, bobs); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second revoke: %v, want ErrNotFound", err)
	}
}

// Contract: POST /cocoonbox.oauth/revoke: an unknown token is no error, and
// a personal token is left alone.
func TestRevokeSecretLeavesUnknownAndPersonalTokensAlone(t *testing.T) {
	f := newFixture(t)
	alice := f.user("alice")
	_, secret := f.device(alice, "laptop")
	personal := "cb_" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sum := sha256.Sum256([]byte(personal))
	if _, err := f.db.Pool.Exec(f.ctx, `UPDATE users SET token_sha256 = $2 WHERE id = $1`, alice, sum[:]); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"cb_unknown", personal} {
		if err := f.store.RevokeSecret(f.ctx, tok); err != nil {
			t.Fatalf("RevokeSecret(%s): %v", tok, err)
		}
	}
	var still bool
	f.db.Pool.QueryRow(f.ctx, `SELECT token_sha256 IS NOT NULL FROM users WHERE id = $1`, alice).Scan(&still)
	if list, _ := f.store.List(f.ctx, alice); !still || len(list) != 1 {
		t.Fatalf("personal token kept %v, devices %d: want both kept", still, len(list))
	}
	if err := f.store.RevokeSecret(f.ctx, secret); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.store.List(f.ctx, alice); len(list) != 0 || f.reloads.count(alice) != 1 {
		t.Fatalf("the device token was not revoked: %v, reloads %v", list, f.reloads.users)
	}
}

func TestRevokePersonalLeavesDevices(t *testing.T) {
	f := newFixture(t)
	alice := f.user("alice")
	f.device(alice, "laptop")
	if err := f.store.RevokePersonal(f.ctx, alice); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.store.List(f.ctx, alice); len(list) != 1 {
		t.Fatal("revoking the personal token removed a device")
	}
}

// The bug this names: sign out everywhere over gRPC with a device token
// answered UNAUTHENTICATED now and then. Its commit reached this api's index
// through the NOTIFY listener, which ended the call's context (its token
// was gone) while the COMMIT's answer was on its way, so the handler saw
// "context canceled". A revoke now runs to its end whatever the calling
// context does: here it is cancelled before the call even starts.
func TestARevokeRunsToItsEndWhenTheCallersContextEnds(t *testing.T) {
	f := newFixture(t)
	alice := f.user("alice")
	laptop, _ := f.device(alice, "laptop")
	f.device(alice, "desk")
	ended, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.store.Revoke(ended, alice, laptop); err != nil {
		t.Fatalf("Revoke on an ended context: %v", err)
	}
	if err := f.store.RevokePersonal(ended, alice); err != nil {
		t.Fatalf("RevokePersonal on an ended context: %v", err)
	}
	if list, _ := f.store.List(f.ctx, alice); len(list) != 1 {
		t.Fatalf("after the revoke: %d devices, want 1", len(list))
	}
	if err := f.store.SignOutEverywhere(ended, alice); err != nil {
		t.Fatalf("SignOutEverywhere on an ended context: %v", err)
	}
	if list, _ := f.store.List(f.ctx, alice); len(list) != 0 {
		t.Fatalf("after sign out everywhere: %d devices, want 0", len(list))
	}
}
