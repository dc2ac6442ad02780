package tokens

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/internal/wait"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// queries counts the statements a pool sends (pgx's tracer), by their first word.
type queries struct {
	mu sync.Mutex
	n  map[string]int
}

func (q *queries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	word, _, _ := strings.Cut(strings.TrimSpace(d.SQL), " ")
	q.n[strings.ToUpper(word)]++
	return ctx
}

func (q *queries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (q *queries) count() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := map[string]int{}
	for k, v := range q.n {
		c[k] = v
	}
	return c
}

type fixture struct {
	db    *dbtest.DB
	users *users.Store
	q     *queries
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := dbtest.New(t, users.Schema)
	s := users.NewStore(db.Pool)
	s.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	return &fixture{db: db, users: s, q: &queries{n: map[string]int{}}}
}

// index starts one api's index (a replica) on the fixture's database, its pool traced.
func (f *fixture) index(t testing.TB) *Index {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = f.q
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ix := NewIndex(pool, f.db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := ix.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Stop(); pool.Close() })
	return ix
}

func (f *fixture) user(t testing.TB, name string) users.User {
	t.Helper()
	u, err := f.users.Add(context.Background(), name, "correct horse", false)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// device stores a device token of u as the sign-in does, notifying every api.
func (f *fixture) device(t testing.TB, u users.User, id string) Secret {
	t.Helper()
	secret, sum := New()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, f.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO user_tokens (id, user_id, sha256, client, label) VALUES ($1, $2, $3, 'cocoonbox-cli', 'laptop')", id, u.ID, sum[:]); err != nil {
			return err
		}
		return users.Notify(ctx, tx, u.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// revokeDevice deletes a device token as a revoke does, notifying every api.
func (f *fixture) revokeDevice(t testing.TB, u users.User, id string) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, f.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM user_tokens WHERE id = $1", id); err != nil {
			return err
		}
		return users.Notify(ctx, tx, u.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setup is the usual start: alice with one device token, and an api's index.
func setup(t testing.TB) (*fixture, users.User, Secret, *Index) {
	t.Helper()
	f := newFixture(t)
	alice := f.user(t, "alice")
	dev := f.device(t, alice, "dev_0123456789abcdef")
	return f, alice, dev, f.index(t)
}

func refused(ix *Index, tok Secret) func() (bool, string) {
	return func() (bool, string) {
		p, err := ix.Check(string(tok))
		if errors.Is(err, ErrUnknown) {
			return true, ""
		}
		if p != nil {
			return false, "accepted for " + p.UserName
		}
		return false, err.Error()
	}
}

func TestCheckAnswersThePrincipalOfLiveTokens(t *testing.T) {
	t.Parallel()
	f, alice, dev, ix := setup(t)
	personal, err := NewStore(f.db.Pool, ix).Regenerate(context.Background(), alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ix.Check(string(dev))
	if err != nil || p.UserID != alice.ID || p.UserName != "alice" || p.DeviceID != "dev_0123456789abcdef" || p.Client != "cocoonbox-cli" {
		t.Fatalf("device token: %+v, %v", p, err)
	}
	p, err = ix.Check(string(personal))
	if err != nil || p.UserID != alice.ID || p.DeviceID != "" {
		t.Fatalf("personal token: %+v, %v", p, err)
	}
}

// Bad input: a cbit_ bearer, a cba_ bearer (an agent's), a malformed bearer, a revoked token.
func TestBadInputBearersAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user(t, "alice")
	revoked := f.device(t, alice, "dev_00000000000000aa")
	ix := f.index(t)
	f.revokeDevice(t, alice, "dev_00000000000000aa")
	wait.Eventually(t, 10*time.Second, "the revoked token refused", refused(ix, revoked))
	hex64 := strings.Repeat("ab", 32)
	cases := map[string]error{
		"cbit_" + hex64:                 ErrInviteToken,
		"cbit_":                         ErrInviteToken,
		"cba_" + hex64:                  ErrAgentToken,
		"cba_":                          ErrAgentToken,
		"":                              ErrMalformed,
		"cb_":                           ErrMalformed,
		"cb_" + hex64[:63]:              ErrMalformed,
		"cb_" + hex64 + "0":             ErrMalformed,
		"cb_" + strings.ToUpper(hex64):  ErrMalformed,
		"cb_" + hex64[:62] + "zz":       ErrMalformed,
		"dev_" + hex64[:63]:             ErrMalformed,
		"Bearer cb_" + hex64:            ErrMalformed,
		"cb_" + strings.Repeat("0", 64): ErrUnknown,
	}
	for tok, want := range cases {
		if p, err := ix.Check(tok); !errors.Is(err, want) || p != nil {
			t.Errorf("Check(%q) = %v, %v; want %v", tok, p, err, want)
		}
	}
}

// Must show: the token check issues no database query (counted by pgx's tracer).
func TestCheckIssuesNoQuery(t *testing.T) {
	t.Parallel()
	f, _, dev, ix := setup(t)
	before := f.q.count()
	for range 1000 {
		if _, err := ix.Check(string(dev)); err != nil {
			t.Fatal(err)
		}
		ix.Check("cb_" + strings.Repeat("0", 64))
		ix.Check("cbit_" + strings.Repeat("0", 64))
	}
	// The one queued last-use write may or may not have gone out yet: wait for it.
	wait.Eventually(t, 10*time.Second, "the last use written", func() (bool, string) {
		var used *time.Time
		f.db.Pool.QueryRow(context.Background(), "SELECT used_at FROM user_tokens").Scan(&used)
		return used != nil, "used_at null"
	})
	after := f.q.count()
	for word, n := range after {
		d := n - before[word]
		if word == "UPDATE" && d <= 1 {
			continue
		}
		if d != 0 {
			t.Errorf("3000 checks sent %d %s statements (all: before %v, after %v)", d, word, before, after)
		}
	}
}

// Contract: "the last use is written at most once a minute per device".
func TestLastUseWrittenAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	f, _, dev, ix := setup(t)
	var now atomic.Int64
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now.Store(t0.UnixNano())
	ix.Now = func() time.Time { return time.Unix(0, now.Load()) }
	usedAt := func() time.Time {
		var at *time.Time
		f.db.Pool.QueryRow(context.Background(), "SELECT used_at FROM user_tokens").Scan(&at)
		if at == nil {
			return time.Time{}
		}
		return at.UTC()
	}
	updates := func() int { return f.q.count()["UPDATE"] }
	check := func() {
		if _, err := ix.Check(string(dev)); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		check()
	}
	wait.Eventually(t, 10*time.Second, "the first use written", func() (bool, string) { return usedAt().Equal(t0), usedAt().String() })
	if n := updates(); n != 1 {
		t.Fatalf("100 checks in the first instant: %d UPDATEs, want 1", n)
	}
	now.Store(t0.Add(59 * time.Second).UnixNano())
	check()
	now.Store(t0.Add(61 * time.Second).UnixNano())
	check()
	check()
	wait.Eventually(t, 10*time.Second, "the use a minute later written", func() (bool, string) {
		return usedAt().Equal(t0.Add(61 * time.Second)), usedAt().String()
	})
	if n := updates(); n != 2 {
		t.Fatalf("uses at 0 s, 59 s, 61 s, 61 s: %d UPDATEs, want 2", n)
	}
}

// Two apis on one database: a revoke on one is refused on the other, and the
// principal's Done ends the calls open on it there.
func TestRevokeReachesEveryReplicaAndEndsItsCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user(t, "alice")
	bob := f.user(t, "bob")
	a, b := f.index(t), f.index(t)
	// A token made after both started reaches both through the notification.
	dev := f.device(t, alice, "dev_0123456789abcdef")
	bobs := f.device(t, bob, "dev_00000000000000bb")
	var open *Principal
	wait.Eventually(t, 10*time.Second, "the new token on the second api", func() (bool, string) {
		p, err := b.Check(string(dev))
		open = p
		return err == nil, ErrUnknown.Error()
	})
	f.revokeDevice(t, alice, "dev_0123456789abcdef")
	wait.Eventually(t, 10*time.Second, "revoked on the first api", refused(a, dev))
	wait.Eventually(t, 10*time.Second, "revoked on the second api", refused(b, dev))
	select {
	case <-open.Done():
	default:
		t.Fatal("the revoked token's principal is not done: its calls would go on")
	}
	if _, err := b.Check(string(bobs)); err != nil {
		t.Fatalf("another user's token after the revoke: %v", err)
	}
}

// Two reloads of one user at once, one from a notification (a), one from
// this api's own revoke (b): a reads before the revoke's commit, b after.
// a's snapshot must never be applied after b's, or the revoked token
// works again until the user's next reload. The test holds a between its
// query and its first change, then lets b go as far as it can: with
// reloads serialized b waits for a; without, b reads and applies first,
// and a's older snapshot lands last.
func TestReloadReadBeforeARevokeIsNeverAppliedAfterIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.user(t, "alice")
	dev := f.device(t, alice, "dev_0123456789abcdef")
	// Not started: no LISTEN, so the test's reloads are the only ones.
	ix := NewIndex(f.db.Pool, f.db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(ix.Stop)
	ctx := context.Background()
	if err := ix.Reload(ctx, ""); err != nil {
		t.Fatal(err)
	}
	s := NewStore(f.db.Pool, ix)
	personal, err := s.Regenerate(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	open, err := ix.Check(string(personal))
	if err != nil {
		t.Fatal(err)
	}

	aRead, release, bRead, bWaits := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var loads atomic.Int32
	ix.loaded = func(string) {
		if loads.Add(1) == 1 {
			close(aRead)
			<-release
			return
		}
		close(bRead)
	}
	ix.waiting = func(string) { close(bWaits) }

	a := make(chan error, 1)
	go func() { a <- ix.Reload(ctx, alice.ID) }()
	<-aRead // a's snapshot has the personal token
	b := make(chan error, 1)
	go func() { b <- s.Revoke(ctx, alice.ID) }() // commits, then reloads this api
	select {
	case <-bWaits: // serialized: b queries once a's changes are made
	case <-bRead: // not serialized: b read after the commit; let it apply first
		if err := <-b; err != nil {
			t.Fatal(err)
		}
		b <- nil
	}
	close(release)
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-b; err != nil {
		t.Fatal(err)
	}
	if ok, why := refused(ix, personal)(); !ok {
		t.Fatalf("the revoked personal token works again (a snapshot read before the revoke was applied after it): %s", why)
	}
	select {
	case <-open.Done():
	default:
		t.Fatal("the revoked token's calls were not ended")
	}
	if _, err := ix.Check(string(dev)); err != nil {
		t.Fatalf("alice's device token after the personal token's revoke: %v", err)
	}
}

func TestDisableDropsTokensAndEnableBringsThemBack(t *testing.T) {
	t.Parallel()
	f, _, dev, ix := setup(t)
	ctx := context.Background()
	if _, err := f.users.SetDisabled(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "refused after the disable", refused(ix, dev))
	if _, err := f.users.SetDisabled(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "accepted after the enable", func() (bool, string) {
		_, err := ix.Check(string(dev))
		return err == nil, "refused"
	})
	if err := f.users.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "refused after the delete", refused(ix, dev))
}

// A replica that loses its LISTEN connection reloads its whole index when it
// reconnects, so a change whose notification it missed still holds.
func TestLostListenConnectionReloadsTheWholeIndex(t *testing.T) {
	t.Parallel()
	f, _, dev, ix := setup(t)
	ctx := context.Background()
	// A revoke whose notification never comes (as while the connection is down).
	if _, err := f.db.Pool.Exec(ctx, "DELETE FROM user_tokens"); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Check(string(dev)); err != nil {
		t.Fatalf("control: without a notification the index still has the token, got %v", err)
	}
	var killed int
	err := f.db.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d LISTEN connections, %v", killed, err)
	}
	wait.Eventually(t, 10*time.Second, "refused after the reconnect's reload", refused(ix, dev))
}

// A notification that names no user (another program's pg_notify) makes
// the api reload everything rather than trust a stale index.
func TestMalformedNotificationReloadsTheWholeIndex(t *testing.T) {
	t.Parallel()
	f, _, dev, ix := setup(t)
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, "DELETE FROM user_tokens"); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Check(string(dev)); err != nil {
		t.Fatalf("control: without a notification the index still has the token, got %v", err)
	}
	if _, err := f.db.Pool.Exec(ctx, "SELECT pg_notify($1, 'not-a-user-id')", users.Channel); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "refused after the full reload", refused(ix, dev))
}

func TestPersonalTokenRegenerateAndRevoke(t *testing.T) {
	t.Parallel()
	f, alice, dev, ix := setup(t)
	s := NewStore(f.db.Pool, ix)
	ctx := context.Background()
	first, err := s.Regenerate(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ix.Check(string(first))
	second, err := s.Regenerate(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	// This api reloads at the commit: no waiting.
	if _, err := ix.Check(string(first)); !errors.Is(err, ErrUnknown) {
		t.Fatalf("the replaced personal token: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("the replaced token's calls were not ended")
	}
	if _, err := ix.Check(string(second)); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	f.db.Pool.QueryRow(ctx, "SELECT token_sha256 FROM users").Scan(&stored)
	if sum := sha256.Sum256([]byte(second)); string(stored) != string(sum[:]) {
		t.Fatal("the stored hash is not the new token's SHA-256")
	}
	if info, err := s.Personal(ctx, alice.ID); err != nil || !info.Exists || info.CreatedAt == nil {
		t.Fatalf("personal: %+v, %v", info, err)
	}
	for range 2 { // revoking with none left is no error
		if err := s.Revoke(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.Check(string(second)); !errors.Is(err, ErrUnknown) {
		t.Fatalf("the revoked personal token: %v", err)
	}
	if _, err := ix.Check(string(dev)); err != nil {
		t.Fatalf("a device token after the personal token's revoke: %v", err)
	}
	if info, _ := s.Personal(ctx, alice.ID); info.Exists {
		t.Fatal("the personal token still exists")
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s, _ := New()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("made", "token", s)
	if strings.Contains(b.String(), string(s)[3:10]) || strings.Contains(s.String(), string(s)[3:10]) {
		t.Fatalf("the secret printed: %s", b.String())
	}
	if !strings.HasPrefix(string(s), "cb_") || len(s) != Len {
		t.Fatalf("token shape %q", s)
	}
}

// Token check per call: one map lookup, no allocation.
func BenchmarkCheck(b *testing.B) {
	f := newFixture(b)
	alice := f.user(b, "alice")
	dev := f.device(b, alice, "dev_0123456789abcdef")
	for i := range 10000 { // an index of some size
		f.device(b, alice, fmt.Sprintf("dev_%016x", i+1))
	}
	ix := f.index(b)
	tok := string(dev)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ix.Check(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// A notification's reload of one user, in an index of 10,000 other tokens:
// it costs that user's rows, not the index's size.
func BenchmarkReloadOneUser(b *testing.B) {
	f := newFixture(b)
	alice, bob := f.user(b, "alice"), f.user(b, "bob")
	f.device(b, alice, "dev_0123456789abcdef")
	ctx := context.Background()
	if _, err := f.db.Pool.Exec(ctx, `INSERT INTO user_tokens (id, user_id, sha256, client, label)
		SELECT 'dev_' || lpad(to_hex(i), 16, '0'), $1, sha256(i::text::bytea), 'cocoonbox-cli', 'x' FROM generate_series(1, 10000) i`, bob.ID); err != nil {
		b.Fatal(err)
	}
	ix := f.index(b)
	if ix.Len() != 10001 {
		b.Fatalf("index of %d tokens", ix.Len())
	}
	for b.Loop() {
		if err := ix.Reload(ctx, alice.ID); err != nil {
			b.Fatal(err)
		}
	}
}
