package vault

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testValue is a value no fixture holds by chance; tests grep for it.
const testValue = "sk-proj-TESTVALUE0123456789abcdefTESTVALUE"

// valueForms are a value and the forms it could leak in.
func valueForms(v string) []string {
	return []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v))}
}

// assertNoValue fails when b holds value in any of its forms.
func assertNoValue(t *testing.T, what string, b []byte, value string) {
	t.Helper()
	for _, f := range valueForms(value) {
		if bytes.Contains(b, []byte(f)) {
			t.Errorf("%s holds the value (as %q): %s", what, f, b)
		}
	}
}

func masterKey(t *testing.T) *MasterKey {
	t.Helper()
	m, err := LoadMasterKey(filepath.Join(t.TempDir(), "master.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type fixture struct {
	db     *dbtest.DB
	store  *Store
	owner  string
	pushed []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{db: dbtest.New(t, users.Schema, Schema)}
	f.store = NewStore(f.db.Pool, masterKey(t), func(owner string) { f.pushed = append(f.pushed, owner) })
	f.owner = f.user(t, "alice")
	return f
}

func (f *fixture) user(t *testing.T, name string) string {
	t.Helper()
	var id string
	if err := f.db.Pool.QueryRow(context.Background(), "INSERT INTO users (name, password_hash) VALUES ($1, 'x') RETURNING id", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var openai = Spec{Hosts: []string{"api.openai.com"}}

func TestAddListRotateDeleteWithAudit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	k, err := f.store.Add(ctx, f.owner, ActorCLI, "OPENAI_API_KEY", openai, NewSecret(testValue))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sk-proj-cbv_[0-9a-f]{32}$`).MatchString(k.Placeholder) || k.How != "Authorization: Bearer {}" {
		t.Fatalf("added %+v", k)
	}
	u, err := f.store.Unseal(ctx, f.owner)
	if err != nil || len(u) != 1 || u[0].Value.Reveal() != "Bearer "+testValue {
		t.Fatalf("unseal: %+v %v", u, err)
	}
	if _, err := f.store.Rotate(ctx, f.owner, ActorConsole, "OPENAI_API_KEY", NewSecret("ghp_other")); err != nil {
		t.Fatal(err)
	}
	keys, err := f.store.List(ctx, f.owner)
	if err != nil || len(keys) != 1 || keys[0].Placeholder != k.Placeholder || keys[0].Rotated.IsZero() {
		t.Fatalf("after rotate: %+v %v (the placeholder must stay %s)", keys, err, k.Placeholder)
	}
	if u, _ := f.store.Unseal(ctx, f.owner); u[0].Value.Reveal() != "Bearer ghp_other" {
		t.Fatalf("rotated value not served: %v", u)
	}
	if err := f.store.Delete(ctx, f.owner, ActorApp, "OPENAI_API_KEY"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(ctx, f.owner, ActorApp, "OPENAI_API_KEY"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := f.store.Rotate(ctx, f.owner, ActorApp, "OPENAI_API_KEY", NewSecret("x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rotate of a deleted key: %v", err)
	}
	var got []string
	rows, _ := f.db.Pool.Query(ctx, "SELECT action || ':' || actor || ':' || name FROM vault_audit ORDER BY id")
	for rows.Next() {
		var s string
		rows.Scan(&s)
		got = append(got, s)
	}
	want := "create:cli:OPENAI_API_KEY rotate:console:OPENAI_API_KEY delete:app:OPENAI_API_KEY"
	if strings.Join(got, " ") != want {
		t.Fatalf("audit %q, want %q", got, want)
	}
	if len(f.pushed) != 3 {
		t.Fatalf("pushed %d times, want one per change (3)", len(f.pushed))
	}
}

// TestValueNeverStoredInTheClear greps every row of the vault's tables and
// the user's for the value in its forms.
func TestValueNeverStoredInTheClear(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.store.Add(ctx, f.owner, ActorCLI, "K", openai, NewSecret(testValue)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT s::text FROM vault_secrets s", "SELECT a::text FROM vault_audit a", "SELECT u::text FROM users u"} {
		rows, err := f.db.Pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			rows.Scan(&s)
			assertNoValue(t, q, []byte(s), testValue)
			assertNoValue(t, q, []byte(s), "Bearer "+testValue)
		}
	}
}

// TestSealedValueIsBoundToItsRow: a sealed value copied to another key's
// row or another owner's does not open (the additional data names both).
func TestSealedValueIsBoundToItsRow(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for _, n := range []string{"A", "B"} {
		if _, err := f.store.Add(ctx, f.owner, ActorCLI, n, openai, NewSecret(testValue+n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.db.Pool.Exec(ctx, "UPDATE vault_secrets SET value_sealed = (SELECT value_sealed FROM vault_secrets WHERE name = 'A') WHERE name = 'B'"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Unseal(ctx, f.owner); err == nil || !strings.Contains(err.Error(), "key B") {
		t.Fatalf("a value moved to another row opened: %v", err)
	}
}

// TestOtherMasterKeyFailsLoudlyNothingOverwritten is a replica given
// another master key: every call that needs the state key fails naming
// the cause, and neither the state key nor any value is replaced.
func TestOtherMasterKeyFailsLoudlyNothingOverwritten(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.store.Add(ctx, f.owner, ActorCLI, "K", openai, NewSecret(testValue)); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var s string
		if err := f.db.Pool.QueryRow(ctx, "SELECT (SELECT encode(state_key_sealed, 'hex') FROM users) || (SELECT string_agg(encode(value_sealed, 'hex'), ',') FROM vault_secrets)").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	other := NewStore(f.db.Pool, masterKey(t), nil)
	if _, err := other.Add(ctx, f.owner, ActorCLI, "K2", openai, NewSecret(testValue)); !errors.Is(err, ErrWrongMasterKey) {
		t.Fatalf("add on the other replica: %v", err)
	}
	if _, err := other.Rotate(ctx, f.owner, ActorCLI, "K", NewSecret("new")); !errors.Is(err, ErrWrongMasterKey) {
		t.Fatalf("rotate on the other replica: %v", err)
	}
	if _, err := other.Unseal(ctx, f.owner); !errors.Is(err, ErrWrongMasterKey) || !strings.Contains(err.Error(), "master key") {
		t.Fatalf("unseal on the other replica: %v", err)
	}
	if after := snapshot(); after != before {
		t.Fatal("the other replica changed the sealed state key or a value")
	}
	if n := f.count(t, "SELECT count(*) FROM vault_secrets"); n != 1 {
		t.Fatalf("%d keys, want the one", n)
	}
	if u, err := f.store.Unseal(ctx, f.owner); err != nil || u[0].Value.Reveal() != "Bearer "+testValue {
		t.Fatalf("the right replica no longer unseals: %v", err)
	}
}

func TestVaultGoesWithTheUserRow(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.store.Add(ctx, f.owner, ActorCLI, "K", openai, NewSecret(testValue)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, "DELETE FROM users WHERE id = $1", f.owner); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, "SELECT (SELECT count(*) FROM vault_secrets) + (SELECT count(*) FROM vault_audit)"); n != 0 {
		t.Fatalf("%d vault rows outlived their user", n)
	}
}

func TestSweepDeletesAuditOlderThan90Days(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.store.Add(ctx, f.owner, ActorCLI, "K", openai, NewSecret(testValue)); err != nil {
		t.Fatal(err)
	}
	f.store.Rotate(ctx, f.owner, ActorCLI, "K", NewSecret("v2"))
	f.db.Pool.Exec(ctx, "UPDATE vault_audit SET at = now() - interval '91 days' WHERE action = 'create'")
	f.db.Pool.Exec(ctx, "UPDATE vault_audit SET at = now() - interval '89 days' WHERE action = 'rotate'")
	n, err := f.store.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want the one row older than 90 days", n, err)
	}
	if n := f.count(t, "SELECT count(*) FROM vault_audit WHERE action = 'rotate'"); n != 1 {
		t.Fatal("the 89-day row went too")
	}
}

func TestPlaceholderVendorPrefix(t *testing.T) {
	for v, want := range map[string]string{
		"sk-proj-abc": "sk-proj-", "sk-ant-api03-x": "sk-ant-", "sk-abc": "sk-", "ghp_x": "ghp_",
		"github_pat_11": "github_pat_", "AIzaSy": "AIza", "xoxb-1": "xoxb-", "glpat-x": "glpat-",
		"plainvalue": "", "SK-proj-x": "", "sk": "",
	} {
		if got := VendorPrefix(v); got != want {
			t.Errorf("VendorPrefix(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestSecretPrintsItsIDOnly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.store.Add(ctx, f.owner, ActorCLI, "K", openai, NewSecret(testValue))
	u, err := f.store.Unseal(ctx, f.owner)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := newTestLogger(&buf)
	log.Info("x", "secret", u[0].Value, "unsealed", u[0])
	buf.WriteString(sprintAll(u[0], u[0].Value, NewSecret(testValue)))
	assertNoValue(t, "printed forms", buf.Bytes(), testValue)
	if !strings.Contains(buf.String(), u[0].ID) {
		t.Fatalf("the id is not printed: %s", buf.String())
	}
}

func TestMasterKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "master.key")
	m, err := LoadMasterKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 || st.Size() != MasterKeySize {
		t.Fatalf("made %v, %d bytes", st.Mode(), st.Size())
	}
	again, err := LoadMasterKey(path, true)
	if err != nil || !bytes.Equal(again.key, m.key) {
		t.Fatal("a second start made another key")
	}
	for name, tc := range map[string]struct {
		data   []byte
		mode   os.FileMode
		create bool
		want   string
	}{
		"31 bytes": {make([]byte, 31), 0o600, true, "holds 31 bytes, not 32"},
		"33 bytes": {make([]byte, 33), 0o600, false, "holds 33 bytes"},
		"empty":    {[]byte{}, 0o600, true, "holds 0 bytes"},
		"readable": {make([]byte, 32), 0o640, false, "mode 0640"},
		"missing":  {nil, 0, false, "is missing"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if tc.data != nil {
			os.WriteFile(p, tc.data, tc.mode)
			os.Chmod(p, tc.mode)
		}
		if _, err := LoadMasterKey(p, tc.create); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s and %q", name, err, p, tc.want)
		}
	}
}
