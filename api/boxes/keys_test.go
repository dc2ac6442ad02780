//go:build booted

package boxes

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/api/vault"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// flaky is the package's supervisor with SetClaimEnv failing while fails
// is above zero (each failure counts it down): a push that fails.
type flaky struct {
	sandbox.Supervisor
	fails atomic.Int32
}

func (f *flaky) SetClaimEnv(ctx context.Context, id string, entries []sandbox.ClaimEntry) error {
	if f.fails.Add(-1) >= 0 {
		return sandbox.ErrUnavailable
	}
	return f.Supervisor.SetClaimEnv(ctx, id, entries)
}

// keysEnv is env with the key vault: its store pushes each change to the
// service; v2 (localtest's second version) is the first image that
// intercepts, so a v1 box stands for an older image.
//
// offline closes the service and starts another that the store's changes
// do not reach (pushes lost, as when the api that made the change died):
// only a wake or boot can bring them; the func it answers connects the
// new service to the store.
func keysEnv(t *testing.T) (e *env, store *vault.Store, fl *flaky, offline func() (online func())) {
	t.Helper()
	db := dbtest.New(t, users.Schema, Schema, vault.Schema)
	master, err := vault.LoadMasterKey(filepath.Join(t.TempDir(), "master.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	var svc atomic.Pointer[Service]
	store = vault.NewStore(db.Pool, master, func(owner string) {
		if s := svc.Load(); s != nil {
			s.PushKeys(owner)
		}
	})
	fl = &flaky{Supervisor: sup}
	start := func() *Service {
		s, err := New(context.Background(), Config{Pool: db.Pool, URL: db.URL, Hosts: map[string]sandbox.Supervisor{"local": fl},
			Keys: store.Entries, InterceptFrom: 2,
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e = &env{t: t, db: db, s: start()}
	svc.Store(e.s)
	offline = func() func() {
		svc.Store(nil)
		e.s.Close()
		e.s = start()
		return func() { svc.Store(e.s) }
	}
	t.Cleanup(func() {
		e.s.Close()
		rows, _ := db.Pool.Query(context.Background(), "SELECT id FROM boxes")
		var ids []string
		for rows.Next() {
			var id string
			rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			sup.Delete(context.Background(), id)
		}
	})
	return e, store, fl, offline
}

func hostEntries(t *testing.T, id string) []sandbox.ClaimEntry {
	t.Helper()
	es, err := sup.HostClaims(id)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// valueIn says whether s holds v as is, in base64 or in hex.
func valueIn(s, v string) bool {
	for _, f := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v))} {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

// TestKeysReachRunningAndHibernatedBoxesAndOldImagesGetNone: an added key
// arrives on the running box at once (the record in /run/silkd.env, the
// value only in the supervisor's host-only entry); a rotation reaches it,
// through a push that fails twice and is retried; a hibernated box gets
// the rotated value at its wake; a delete removes the entry and the
// record; a box of an image that does not intercept gets nothing and is
// listed, until upgraded onto one that does. The box never holds the value.
func TestKeysReachRunningAndHibernatedBoxesAndOldImagesGetNone(t *testing.T) {
	e, store, fl, offline := keysEnv(t)
	ctx := context.Background()
	alice := e.user("alice", 2, 2)
	b, op, err := e.s.Create(ctx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "new", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(alice, op)
	old := e.create(alice, "old") // v1
	const value = "sk-proj-BOXVALUE-0123456789abcdef"
	k, err := store.Add(ctx, alice, vault.ActorCLI, "OPENAI_API_KEY", vault.Spec{Hosts: []string{"api.openai.com"}}, vault.NewSecret(value))
	if err != nil {
		t.Fatal(err)
	}
	record := "OPENAI_API_KEY=" + k.Placeholder + ";api.openai.com;Authorization:%20Bearer%20{}"
	entry := vault.EntryName(k.ID)
	hostValue := func(id string) string {
		for _, es := range hostEntries(t, id) {
			if es.Name == entry {
				return es.Value
			}
		}
		return ""
	}
	box.Eventually(t, 30*time.Second, "the record on the running box", func() (bool, string) {
		got := sh(t, b.ID, "cat /run/silkd.env")
		return strings.Contains(got, record) && hostValue(b.ID) == "Bearer "+value, got
	})
	if env := sh(t, b.ID, "cat /run/silkd.env; cat /run/cocoonbox-vault/* 2>/dev/null; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"); valueIn(env, value) {
		t.Fatalf("the box holds the value:\n%s", env)
	}
	if got := sh(t, old.ID, "cat /run/silkd.env"); strings.Contains(got, k.Placeholder) || len(hostEntries(t, old.ID)) != 0 {
		t.Fatalf("the v1 box got the key: %s %v", got, hostEntries(t, old.ID))
	}
	if bs, err := e.s.WithoutKeys(ctx, alice); err != nil || len(bs) != 1 || bs[0].Name != "old" {
		t.Fatalf("WithoutKeys: %v %v", bs, err)
	}

	// Upgraded onto an image that intercepts, the old box gets the key.
	e.do(alice, e.s.Upgrade, "old")
	if got := sh(t, old.ID, "cat /run/silkd.env"); !strings.Contains(got, record) || hostValue(old.ID) != "Bearer "+value {
		t.Fatalf("after the upgrade to v2 the box holds %q and entry %q", got, hostValue(old.ID))
	}
	if bs, err := e.s.WithoutKeys(ctx, alice); err != nil || len(bs) != 0 {
		t.Fatalf("WithoutKeys after the upgrade: %v %v", bs, err)
	}

	// A rotation whose first two pushes fail arrives through the retries.
	fl.fails.Store(2)
	if _, err := store.Rotate(ctx, alice, vault.ActorCLI, "OPENAI_API_KEY", vault.NewSecret("sk-proj-ROTATED")); err != nil {
		t.Fatal(err)
	}
	box.Eventually(t, 30*time.Second, "the rotated value on the running box, retried", func() (bool, string) {
		v := hostValue(b.ID)
		return v == "Bearer sk-proj-ROTATED", v
	})
	if fl.fails.Load() > 0 {
		t.Fatal("the push did not fail as the test set up")
	}

	// Hibernated, with the push lost: the rotation lands at the wake.
	e.do(alice, e.s.Hibernate, "new")
	online := offline()
	if _, err := store.Rotate(ctx, alice, vault.ActorCLI, "OPENAI_API_KEY", vault.NewSecret("sk-proj-WHILEASLEEP")); err != nil {
		t.Fatal(err)
	}
	if v := hostValue(b.ID); v != "Bearer sk-proj-ROTATED" {
		t.Fatalf("the hibernated box's entry changed with no push: %q", v)
	}
	e.do(alice, e.s.Ensure, "new")
	if v := hostValue(b.ID); v != "Bearer sk-proj-WHILEASLEEP" {
		t.Fatalf("after the wake the entry is %q, want the value rotated while hibernated", v)
	}

	// A delete removes the entry and the record.
	online()
	if err := store.Delete(ctx, alice, vault.ActorCLI, "OPENAI_API_KEY"); err != nil {
		t.Fatal(err)
	}
	box.Eventually(t, 30*time.Second, "the key gone from the running box", func() (bool, string) {
		got := sh(t, b.ID, "cat /run/silkd.env; cat /run/cocoonbox-vault/vault.sh")
		return !strings.Contains(got, k.Placeholder) && len(hostEntries(t, b.ID)) == 0, got
	})
}
