//go:build booted

package boxes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local/localtest"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// These tests boot real boxes: the local supervisor in process (root, and
// the base image `make image` builds in $COCOONBOX_IMAGE), on a bridge of
// their own (cbboxes0, 10.204.0.1/16) so they run beside the supervisor's
// own tests, and real PostgreSQL (a fresh database per test, dbtest).

var (
	sup      *local.Supervisor
	testRoot = "/var/tmp/cocoonbox-boxes-test"
	// v1, v2: the base image as two versions (localtest.Catalog); v1Desk
	// the desk image, when $COCOONBOX_DESK_IMAGE names one (make bench).
	v1, v2 = "cbdesk:v1-base", "cbdesk:v2-base"
	v1Desk = "cbdesk:v1-desk"
	seq    atomic.Int64
)

// testNetwork is the tests' own box network.
func testNetwork() local.Network {
	n := local.DefaultNetwork()
	n.Bridge, n.Gateway = "cbboxes0", netip.MustParsePrefix("10.204.0.1/16")
	return n
}

func TestMain(m *testing.M) {
	harness.Main(m, harness.Booted{Pkg: "api/boxes", SetUp: setUp, Run: dbtest.Run, TearDown: tearDown})
}

// setUp makes the image catalog and the package's supervisor, and deletes
// the machines a crashed earlier run left.
func setUp(ctx context.Context, image string) error {
	images := filepath.Join(testRoot, "images")
	if _, err := localtest.Catalog(images, image, os.Getenv("COCOONBOX_DESK_IMAGE")); err != nil {
		return err
	}
	var err error
	sup, err = local.New(ctx, local.Config{StateDir: filepath.Join(testRoot, "state"), Images: images,
		Network: testNetwork(), EgressHosts: []string{"deb.debian.org"}, DefaultMaxClaims: 1000, Spares: 1,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	old, _ := sup.List(ctx, "")
	for _, mm := range old {
		_ = sup.Delete(ctx, mm.ID)
	}
	return nil
}

// tearDown closes the supervisor and removes its state and the catalog.
func tearDown() error {
	if sup != nil {
		sup.Close()
	}
	os.RemoveAll(testRoot)
	return nil
}

// env is one test's database, service and users.
type env struct {
	t  testing.TB
	db *dbtest.DB
	s  *Service
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, func(*Config) {})
}

// newEnvWith is newEnv with the service's Config as set changes it.
func newEnvWith(t testing.TB, set func(*Config)) *env {
	t.Helper()
	db := dbtest.New(t, users.Schema, Schema)
	cfg := Config{Pool: db.Pool, URL: db.URL, Hosts: map[string]sandbox.Supervisor{"local": sup},
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	set(&cfg)
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, s: s}
	t.Cleanup(func() {
		s.Close()
		// The machines of this test's boxes, whatever the test left.
		bs, _ := db.Pool.Query(context.Background(), "SELECT id FROM boxes")
		var ids []string
		for bs.Next() {
			var id string
			if bs.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		bs.Close()
		for _, id := range ids {
			if err := sup.Delete(context.Background(), id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("delete machine %s: %v", id, err)
			}
		}
	})
	return e
}

// user makes a user (the password hash is never checked here) with
// max_boxes and max_running.
func (e *env) user(name string, maxBoxes, maxRunning int) string {
	e.t.Helper()
	var id string
	err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO users (name, password_hash, max_boxes, max_running)
 VALUES ($1, 'unused', $2, $3) RETURNING id::text`, name, maxBoxes, maxRunning).Scan(&id)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// hold takes box boxID's advisory lock on a connection of its own, as the
// runner of another api holds it, so an operation begun on the box waits
// under way; the answer lets it go (and is called at the test's end too).
func (e *env) hold(boxID string) (release func()) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := e.db.Pool.Acquire(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey("box", boxID)); err != nil {
		conn.Release()
		e.t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey("box", boxID)); err != nil {
				e.t.Error(err)
			}
			conn.Release()
		})
	}
	e.t.Cleanup(release)
	return release
}

// rid is a request id no other call of the run uses.
func rid() string { return fmt.Sprintf("req-%d", seq.Add(1)) }

// wait follows the operation to its end and fails the test unless it is
// done; it answers every step seen.
func (e *env) wait(userID string, op *Operation) []*controlv1.Operation {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var steps []*controlv1.Operation
	last, err := e.s.WaitOperation(ctx, userID, op.ID, func(o *controlv1.Operation) { steps = append(steps, o) })
	if err != nil {
		e.t.Fatalf("wait for %s %s: %v", op.Kind, op.ID, err)
	}
	if last.Phase != controlv1.Phase_PHASE_DONE {
		e.t.Fatalf("%s %s ended %s: %s", op.Kind, op.ID, last.Phase, last.Error)
	}
	return steps
}

// do runs call (e.s.Hibernate, Save, Ensure, Delete, ...) on box as
// userID with a fresh request id and waits for its operation to end done,
// failing the test on a refusal; it answers the operation's steps.
func (e *env) do(userID string, call func(context.Context, Call) (*Box, *Operation, error), box string) []*controlv1.Operation {
	e.t.Helper()
	_, op, err := call(context.Background(), Call{UserID: userID, RequestID: rid(), Box: box})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.wait(userID, op)
}

// create makes a box and waits for it to run.
func (e *env) create(userID, name string) *Box {
	e.t.Helper()
	b, op, err := e.s.Create(context.Background(), Call{UserID: userID, RequestID: rid()}, CreateRequest{Name: name, Image: v1})
	if err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	e.wait(userID, op)
	return e.box(userID, b.ID)
}

// box reads the box's row now.
func (e *env) box(userID, ref string) *Box {
	e.t.Helper()
	b, err := findBox(context.Background(), e.db.Pool, userID, ref, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// sh runs a shell line in the box as root and answers its stdout; a
// failure fails the test.
func sh(t testing.TB, boxID, line string) string {
	t.Helper()
	out, err := ExecIn(context.Background(), sup, boxID, nil, "sh", "-c", line)
	if err != nil {
		t.Fatalf("in %s: %q: %v", boxID, line, err)
	}
	return out
}

// hostname waits until the box's hostname is want.
func hostname(t testing.TB, boxID, want string) {
	t.Helper()
	box.Eventually(t, 15*time.Second, "hostname "+want, func() (bool, string) {
		got := strings.TrimSpace(sh(t, boxID, "cat /proc/sys/kernel/hostname"))
		return got == want, got
	})
}
