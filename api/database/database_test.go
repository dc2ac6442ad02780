package database

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// stateDir is a short directory (the socket path limit) the cluster's user can enter.
func stateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cbst")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func open(t testing.TB, dir string, shared bool) (*DB, error) {
	return Open(context.Background(), Options{StateDir: dir, SystemUser: "postgres", MaxConns: 4, Shared: shared})
}

// Contract (issue 10, Database): the embedded cluster comes up on an empty
// state directory, and a restart keeps what was written.
func TestEmbeddedClusterOnEmptyStateDirKeepsDataAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	ctx := context.Background()
	db, err := open(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before restart')"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/postgres/data/postmaster.pid"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cluster still runs after Close (postmaster.pid: %v)", err)
	}
	db, err = open(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var v string
	if err := db.Pool.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "before restart" {
		t.Fatalf("after restart: %q, %v", v, err)
	}
}

// Contract (issue 10, Database): a second api on the same state directory
// refuses with a clear message; an admin command (Shared) uses the running one.
func TestSecondApiOnSameStateDirRefuses(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	ctx := context.Background()
	db, err := open(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	_, err = open(t, dir, false)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another cocoonbox-api (pid ") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second open: %v, want ErrLocked naming the pid and the directory", err)
	}
	admin, err := open(t, dir, true)
	if err != nil {
		t.Fatalf("shared open beside the serving api: %v", err)
	}
	if err := admin.Pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	// The admin's Close must leave the serving api's cluster running.
	if err := db.Pool.Ping(ctx); err != nil {
		t.Fatalf("the serving api's cluster died with the admin command: %v", err)
	}
}

// The bug this names: `testcluster stop` (a Cluster value that did not
// start the cluster) ran pg_ctl as root, which refuses, so the shared test
// cluster of make test was never stopped.
func TestStopFromAnotherClusterValueStopsIt(t *testing.T) {
	t.Parallel()
	dir := stateDir(t) + "/pg"
	ctx := context.Background()
	if err := (&Cluster{Dir: dir, User: "postgres", Fast: true}).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := (&Cluster{Dir: dir, User: "postgres"}).Stop(ctx); err != nil {
		t.Fatalf("stop from a fresh Cluster value: %v", err)
	}
	if _, err := os.Stat(dir + "/data/postmaster.pid"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cluster still runs (postmaster.pid: %v)", err)
	}
}

func TestSharedOpenWithoutServingApiStartsTheCluster(t *testing.T) {
	t.Parallel()
	db, err := open(t, stateDir(t), true)
	if err != nil {
		t.Fatal(err)
	}
	db.Close(context.Background())
}

func TestUnreachableStateDirIsNamed(t *testing.T) {
	testenv.RequireRoot(t, "a cluster run by another user (postgres) than the api")
	t.Parallel()
	dir := stateDir(t)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := open(t, dir+"/state", false)
	if err == nil || !strings.Contains(err.Error(), "cannot enter "+dir) {
		t.Fatalf("error %v, want one naming %s", err, dir)
	}
}

func TestMigrateKeepsEachSchemaInItsOwnTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := open(t, stateDir(t), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	one := Schema{Table: "one_schema_migrations", FS: fstest.MapFS{
		"0001_a.sql": {Data: []byte("-- +goose Up\nCREATE TABLE a (id int);\n")},
	}}
	two := Schema{Table: "two_schema_migrations", FS: fstest.MapFS{
		"0001_b.sql": {Data: []byte("-- +goose Up\nCREATE TABLE b (a int);\n")},
		"0009_c.sql": {Data: []byte("-- +goose Up\nCREATE TABLE c (a int);\n")},
	}}
	for range 2 { // a second run changes nothing
		if err := Migrate(ctx, db.Pool, one, two); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM one_schema_migrations WHERE version_id > 0) * 10 + (SELECT count(*) FROM two_schema_migrations WHERE version_id > 0)").Scan(&n); err != nil || n != 12 {
		t.Fatalf("applied migrations one*10+two = %d, %v; want 12", n, err)
	}
}

// Embedded database cold start: initdb, start, CREATE DATABASE, a pool.
func BenchmarkEmbeddedColdStart(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		db, err := open(b, stateDir(b), false)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		db.Close(ctx)
		b.StartTimer()
	}
}

// Embedded database warm start: pg_ctl start on an existing cluster, a pool.
func BenchmarkEmbeddedWarmStart(b *testing.B) {
	ctx := context.Background()
	dir := stateDir(b)
	db, err := open(b, dir, false)
	if err != nil {
		b.Fatal(err)
	}
	db.Close(ctx)
	for b.Loop() {
		db, err := open(b, dir, false)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		db.Close(ctx)
		b.StartTimer()
	}
}

// Two admin commands on a stopped state directory at once: the second took
// the first for a serving api, connected to the cluster the first was
// starting (or stopping) and failed with a raw "dial unix ... no such file".
// Now an admin command's lock says so, and the second admin command and a
// serve just after it wait until it ends, then start the cluster
// themselves.
func TestAnAdminCommandHoldingTheStateDirIsWaitedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, second := range []struct {
		what   string
		shared bool
	}{{"a second admin command", true}, {"serve", false}} {
		dir := stateDir(t)
		first, err := open(t, dir, true)
		if err != nil {
			t.Fatal(err)
		}
		if held, _ := os.ReadFile(dir + "/api.lock"); !strings.HasSuffix(strings.TrimSpace(string(held)), " "+RoleAdmin) {
			t.Fatalf("the admin command's lock file says %q, want its pid and %q", held, RoleAdmin)
		}
		var closed atomic.Bool
		done := make(chan error, 1)
		go func() {
			db, err := open(t, dir, second.shared)
			if err == nil {
				if !closed.Load() {
					err = errors.New("it opened while the first admin command still held the state directory")
				} else if perr := db.Pool.Ping(ctx); perr != nil {
					err = perr
				}
				db.Close(ctx)
			}
			done <- err
		}()
		if _, err := first.Pool.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		closed.Store(true)
		if err := first.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s after an admin command: %v", second.what, err)
		}
	}
}
