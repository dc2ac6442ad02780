// Package dbtest gives each test a fresh database on real PostgreSQL, made
// from a template migrated once (CREATE DATABASE ... TEMPLATE), and dumps
// the database into the test's log when the test fails.
//
// The cluster is the one `make test` starts for the whole run and names in
// COCOONBOX_TEST_DATABASE_URL (several test binaries share it, so the
// template is made under an advisory lock). With the variable unset, Main
// starts a throwaway cluster for the test binary, so `go test ./api/...`
// works by hand: call it from the package's TestMain.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL names the variable holding the shared test cluster's URL (a
// superuser on a database that may CREATE DATABASE).
const EnvURL = "COCOONBOX_TEST_DATABASE_URL"

// Main runs the package's tests (call it from TestMain). When EnvURL is
// unset it starts a throwaway cluster first and stops it after.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with more to clean up: it
// answers m.Run's exit code (1 when the throwaway cluster fails).
func Run(m *testing.M) int {
	if os.Getenv(EnvURL) != "" {
		return m.Run()
	}
	code, err := withThrowawayCluster(m.Run)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		return 1
	}
	return code
}

// orphanPrefix starts a throwaway cluster's directory, followed by the pid
// of the test binary that owns it.
const orphanPrefix = "cbpg-"

// reapOrphans stops the throwaway clusters of test binaries that died
// without stopping them (killed by a timeout or ^C): pg_ctl runs the
// cluster apart from the binary, so it outlives it.
func reapOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), orphanPrefix+"*-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), orphanPrefix), "-", 2)[0])
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // not ours, or its binary still runs
		}
		(&database.Cluster{Dir: filepath.Join(d, "pg"), User: "postgres"}).Stop(context.Background())
		os.RemoveAll(d)
	}
}

func withThrowawayCluster(run func() int) (int, error) {
	reapOrphans()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", orphanPrefix, os.Getpid()))
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// The cluster's user (postgres, when the tests run as root) must enter it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return 0, err
	}
	c := &database.Cluster{Dir: filepath.Join(dir, "pg"), User: "postgres", Fast: true}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		return 0, err
	}
	defer c.Stop(ctx)
	os.Setenv(EnvURL, c.URL())
	return run(), nil
}

// DB is a test's own database: a pool on it and its URL (for processes the test starts).
type DB struct {
	Pool *pgxpool.Pool
	URL  string
}

var templates sync.Map // template name → *sync.Once-guarded result

type tplResult struct {
	once sync.Once
	err  error
}

// New makes a fresh database for t from the template of schemas (migrated
// once per cluster), opens a pool on it, and drops it when t ends, dumping
// its rows into t's log first when t failed.
func New(t testing.TB, schemas ...database.Schema) *DB {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		t.Fatalf("dbtest: %s is unset and this package's TestMain does not call dbtest.Main", EnvURL)
	}
	ctx := context.Background()
	tpl, err := templateName(schemas)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := templates.LoadOrStore(tpl, &tplResult{})
	res := r.(*tplResult)
	res.once.Do(func() { res.err = makeTemplate(ctx, base, tpl, schemas) })
	if res.err != nil {
		t.Fatalf("dbtest: template %s: %v", tpl, res.err)
	}
	name := "t_" + randHex(8)
	if err := adminExec(ctx, base, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl)); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	u := withDatabase(base, name)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		if t.Failed() {
			dump(t, u)
		}
		if err := adminExec(ctx, base, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: %v", err)
		}
	})
	return &DB{Pool: pool, URL: u}
}

// templateName is a hash of the schemas' tables and files: a changed
// migration makes another template, never reuses a stale one.
func templateName(schemas []database.Schema) (string, error) {
	h := sha256.New()
	for _, s := range schemas {
		fmt.Fprintf(h, "table %s\n", s.Table)
		var names []string
		err := fs.WalkDir(s.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				names = append(names, p)
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("dbtest: %s: %w", s.Table, err)
		}
		sort.Strings(names)
		for _, n := range names {
			data, err := fs.ReadFile(s.FS, n)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "file %s %d\n", n, len(data))
			h.Write(data)
		}
	}
	return "cbtpl_" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// makeTemplate migrates the template once per cluster. Test binaries run
// at once: an advisory lock serializes them, and the template is made under
// a temporary name and renamed, so a crash midway never leaves a half one.
func makeTemplate(ctx context.Context, base, tpl string, schemas []database.Schema) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	sum := sha256.Sum256([]byte(tpl))
	key := int64(binary.BigEndian.Uint64(sum[:8]))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tpl).Scan(&exists); err != nil || exists {
		return err
	}
	tmp := tpl + "_new"
	for _, q := range []string{"DROP DATABASE IF EXISTS " + tmp + " WITH (FORCE)", "CREATE DATABASE " + tmp} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	pool, err := pgxpool.New(ctx, withDatabase(base, tmp))
	if err != nil {
		return err
	}
	err = database.Migrate(ctx, pool, schemas...)
	pool.Close()
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "ALTER DATABASE "+tmp+" RENAME TO "+tpl)
	return err
}

func adminExec(ctx context.Context, base, q string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, q)
	return err
}

// withDatabase is base with its database replaced by name.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("dbtest: %s is not a URL", EnvURL))
	}
	u.Path = "/" + name
	return u.String()
}

// dump puts the failed test's rows into its log (pg_dump, data only).
func dump(t testing.TB, u string) {
	out, err := exec.Command(filepath.Join(database.PostgresBin, "pg_dump"), "--data-only", "--column-inserts", "--no-owner", "--dbname", u).CombinedOutput()
	if err != nil {
		t.Logf("dbtest: pg_dump: %v\n%s", err, out)
		return
	}
	t.Logf("dbtest: the test's database at its end:\n%s", out)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
