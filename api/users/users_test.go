package users

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// cheap keeps the tests' hashing fast; DefaultKDF is tested on its own.
var cheap = KDF{Time: 1, MemoryKiB: 64, Threads: 1}

func newStore(t *testing.T) (*Store, *dbtest.DB) {
	t.Helper()
	db := dbtest.New(t, Schema)
	s := NewStore(db.Pool)
	s.KDF = cheap
	return s, db
}

func TestAddListAuthenticate(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	alice, err := s.Add(ctx, "alice", "correct horse", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "bob", "battery staple", false); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alice" || !list[0].Admin || list[1].Admin {
		t.Fatalf("list %+v, %v", list, err)
	}
	got, err := s.Authenticate(ctx, "alice", "correct horse")
	if err != nil || got.ID != alice.ID {
		t.Fatalf("authenticate: %+v, %v", got, err)
	}
	for name, pw := range map[string]string{"alice": "wrong horse", "carol": "correct horse"} {
		if _, err := s.Authenticate(ctx, name, pw); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("%s/%s: %v, want ErrBadCredentials", name, pw, err)
		}
	}
}

// The first unknown name cost a hash more than a known one (the dummy it
// verifies against was made then): a sign-in of any name makes it, so
// from the first one on an unknown name costs one verify, as a known one.
// The control: a store no one signed in to has none yet.
func TestFirstUnknownNameCostsNoExtraHash(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Add(ctx, "alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	if s.dummy != "" {
		t.Fatal("the dummy hash exists before any sign-in")
	}
	if _, err := s.Authenticate(ctx, "alice", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if s.dummy == "" {
		t.Fatal("a known name's sign-in left the dummy hash to the first unknown one")
	}
}

func TestPasswordIsStoredAsArgon2idOnly(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	if _, err := s.Add(ctx, "alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	var hash string
	if err := db.Pool.QueryRow(ctx, "SELECT password_hash FROM users").Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=64,t=1,p=1$") || strings.Contains(hash, "horse") {
		t.Fatalf("stored %q", hash)
	}
}

func TestDefaultKDFVerifies(t *testing.T) {
	t.Parallel()
	h := DefaultKDF.Hash("correct horse")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=4$") {
		t.Fatalf("hash %q", h)
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct horsf": false, "": false} {
		if ok, err := Verify(h, pw); err != nil || ok != want {
			t.Errorf("Verify(%q) = %v, %v", pw, ok, err)
		}
	}
	if _, err := Verify("$2a$10$bcrypt", "x"); err == nil {
		t.Error("a non-argon2id hash verified without error")
	}
}

func TestBadNamesAndPasswordsAreRefusedNamingTheRule(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for _, name := range []string{"", "Alice", "-alice", "al ice", "a/b", strings.Repeat("a", 40), "ålice"} {
		if _, err := s.Add(ctx, name, "correct horse", false); !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), "1 to 39") {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for _, pw := range []string{"", "short", strings.Repeat("x", MaxPassword+1)} {
		if _, err := s.Add(ctx, "alice", pw, false); !errors.Is(err, ErrBadPassword) {
			t.Errorf("password of %d bytes: %v", len(pw), err)
		}
	}
	if _, err := s.Add(ctx, "alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "alice", "another one", false); !errors.Is(err, ErrExists) {
		t.Fatalf("second alice: %v", err)
	}
	if list, _ := s.List(ctx); len(list) != 1 {
		t.Fatalf("refused adds left %d users", len(list))
	}
}

func TestDisableEnableDeleteNotifyEveryApi(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	alice, err := s.Add(ctx, "alice", "correct horse", false)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		t.Fatal(err)
	}
	next := func(what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if err != nil || n.Payload != alice.ID {
			t.Fatalf("%s: notification %+v, %v; want one naming %s", what, n, err, alice.ID)
		}
	}
	if u, err := s.SetDisabled(ctx, "alice", true); err != nil || !u.Disabled {
		t.Fatalf("disable: %+v %v", u, err)
	}
	next("disable")
	if _, err := s.Authenticate(ctx, "alice", "correct horse"); !errors.Is(err, ErrDisabled) {
		t.Fatalf("disabled sign-in: %v", err)
	}
	if u, err := s.SetDisabled(ctx, "alice", false); err != nil || u.Disabled {
		t.Fatalf("enable: %+v %v", u, err)
	}
	next("enable")
	if _, err := s.Authenticate(ctx, "alice", "correct horse"); err != nil {
		t.Fatalf("enabled sign-in: %v", err)
	}
	if err := s.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	next("delete")
	if _, err := s.ByName(ctx, "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted alice: %v", err)
	}
	for _, err := range []error{s.Delete(ctx, "alice"), s.SetPassword(ctx, "alice", "whatever1")} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("on a deleted user: %v, want ErrNotFound", err)
		}
	}
	if _, err := s.SetDisabled(ctx, "alice", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("disable a deleted user: %v", err)
	}
}

func TestSetPassword(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Add(ctx, "alice", "correct horse", false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, "alice", "new password"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "correct horse"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("old password: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", "new password"); err != nil {
		t.Fatalf("new password: %v", err)
	}
}

// An account made through GitHub has no password (users 0012): the
// password sign-in refuses it as a wrong password, whatever is typed; an
// admin-made account cannot lose its password without an identity provider.
func TestAccountWithoutPasswordIsRefusedByPasswordSignIn(t *testing.T) {
	t.Parallel()
	s, db := newStore(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "INSERT INTO users (name, idp) VALUES ('octo', 'github')"); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"x", "correct horse", "no such user"} {
		if _, err := s.Authenticate(ctx, "octo", pw); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("password %q: %v, want ErrBadCredentials", pw, err)
		}
	}
	if _, err := db.Pool.Exec(ctx, "INSERT INTO users (name) VALUES ('nopass')"); err == nil {
		t.Error("an account with neither password nor idp was stored")
	}
	if _, err := db.Pool.Exec(ctx, "INSERT INTO users (name, password_hash, idp) VALUES ('gh', 'x', 'gitlab')"); err == nil {
		t.Error("an unknown idp was stored")
	}
}
