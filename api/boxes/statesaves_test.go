//go:build booted

package boxes

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/api/state/store/weedtest"
)

// Must show (issue 42, Deliver 3): save on one supervisor, restore on a
// second supervisor with its own state directory (and its own api and
// database) sharing only the state store, the embedded one and SeaweedFS.
func TestSaveThenRestoreOnAnotherSupervisorThroughTheStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"embedded", func(t *testing.T) store.Store {
			d, err := store.OpenDir(t.TempDir(), "http://127.0.0.1:1", nil)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}},
		{"s3", func(t *testing.T) store.Store {
			w := weedtest.Start(t)
			s3, err := store.OpenS3(context.Background(), w.S3Config)
			if err != nil {
				t.Fatal(err)
			}
			return s3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { saveAndRestoreElsewhere(t, tc.open(t)) })
	}
}

func saveAndRestoreElsewhere(t *testing.T, st store.Store) {
	ctx := context.Background()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	state := &State{Store: st, Keys: func(ctx context.Context, uid string) (*objects.Keys, error) { return objects.NewKeys(uid, key) }}

	// The first api: the package's supervisor.
	a := newEnvWith(t, func(c *Config) { c.State = state })
	u := a.user("traveller", 1, 1)
	b := a.create(u, "keeper")
	sh(t, b.ID, `set -e
echo "written just before the save" >/home/user/notes.txt
chown user:user /home/user/notes.txt
mkdir -p /workspace/app/node_modules /workspace/app/src
echo 'package main' >/workspace/app/src/main.go
echo ignored >/workspace/app/node_modules/dep.js
ln -s src/main.go /workspace/app/main-link
chown -R user:user /workspace/app
mkdir -p /home/user/.local/share/cocoonbox/offload
echo /workspace/app/node_modules/ >/home/user/.local/share/cocoonbox/offload/excludes
rm -f /home/user/.bashrc`)
	a.do(u, a.s.Save, b.Name)
	snaps := listSnapshots(t, st, u, "keeper")
	if len(snaps) != 1 {
		t.Fatalf("snapshots of keeper after one save: %v", snaps)
	}
	// A second save after a small change stores a delta and few chunks.
	chunks := countKeys(t, st, objects.ChunksPrefix(u))
	sh(t, b.ID, `echo "a second line" >>/home/user/notes.txt`)
	a.do(u, a.s.Save, b.Name)
	if snaps = listSnapshots(t, st, u, "keeper"); len(snaps) != 2 {
		t.Fatalf("snapshots of keeper after two saves: %v", snaps)
	}
	if more := countKeys(t, st, objects.ChunksPrefix(u)) - chunks; more < 1 || more > 4 {
		t.Fatalf("the second save added %d chunks for one changed file", more)
	}
	saved := sh(t, b.ID, tree)
	if !strings.Contains(saved, "workspace/app/src/main.go f user:user 644") {
		t.Fatalf("the tree of the saved box:\n%s", saved)
	}
	a.do(u, a.s.Delete, b.Name)

	// The second api: its own database, supervisor and state directory;
	// the same user (its id and state key) and the same store.
	sup2 := secondSupervisor(t)
	bEnv := newEnvWith(t, func(c *Config) { c.State = state; c.Hosts = map[string]sandbox.Supervisor{"other": sup2} })
	if _, err := bEnv.db.Pool.Exec(ctx, `INSERT INTO users (id, name, password_hash, max_boxes, max_running)
 VALUES ($1, 'traveller', 'unused', 1, 1)`, u); err != nil {
		t.Fatal(err)
	}
	r, op, err := bEnv.s.Create(ctx, Call{UserID: u, RequestID: rid()}, CreateRequest{Name: "keeper", Image: v1, Restore: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sup2.Delete(context.Background(), r.ID); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("delete machine %s: %v", r.ID, err)
		}
	})
	bEnv.wait(u, op)
	if got := bEnv.box(u, r.ID); got.Host != "other" || got.State != Running {
		t.Fatalf("the restored box: host %s state %s", got.Host, got.State)
	}
	if got := shOn(t, sup2, r.ID, "cat /home/user/notes.txt"); got != "written just before the save\na second line\n" {
		t.Fatalf("notes.txt on the second supervisor: %q", got)
	}
	// The same tree, the excluded directory and the removed .bashrc
	// left out (the image's /home/user does not show through).
	want := strings.ReplaceAll(saved, "workspace/app/node_modules d user:user 755 \n", "")
	want = strings.ReplaceAll(want, "workspace/app/node_modules/dep.js f user:user 644 \n", "")
	if got := shOn(t, sup2, r.ID, tree); got != want {
		t.Fatalf("the tree on the second supervisor:\n%s\nwant (the first's, node_modules left out):\n%s", got, want)
	}
	userView(t, bEnv, sup2, u, r.ID)
}

// userView: the snapshots listed, one browsed, a file restored into the
// running box in place and under another directory; a path outside the
// trees and an agent's call refused (issue 42, Deliver 4).
func userView(t *testing.T, e *env, s sandbox.Supervisor, u, boxID string) {
	ctx := context.Background()
	list, err := e.s.Snapshots(ctx, u, "keeper")
	if err != nil || len(list) != 2 || list[1].Files < 2 || !(list[0].Name < list[1].Name) {
		t.Fatalf("snapshots of keeper: %+v %v", list, err)
	}
	snap, entries, err := e.s.BrowseSnapshot(ctx, u, "keeper", "", "/home/user")
	if err != nil || snap != list[1].Name {
		t.Fatalf("browse the newest: %s %v", snap, err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Path)
	}
	if !slices.Contains(names, "home/user/notes.txt") || names[0] != "home/user" {
		t.Fatalf("browse /home/user: %v", names)
	}
	if _, _, err := e.s.BrowseSnapshot(ctx, u, "keeper", list[0].Name, "/etc"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "outside /home/user and /workspace") {
		t.Fatalf("browse /etc: %v", err)
	}
	shOn(t, s, boxID, `echo changed >/home/user/notes.txt; rm -rf /workspace/app/src`)
	if _, _, err := e.s.RestorePaths(ctx, u, "keeper", list[0].Name, []string{"/home/user/notes.txt", "/workspace/app/src"}, ""); err != nil {
		t.Fatal(err)
	}
	if got := shOn(t, s, boxID, `stat -c %U /home/user/notes.txt /workspace/app/src/main.go; cat /home/user/notes.txt`); got != "user\nuser\nwritten just before the save\n" {
		t.Fatalf("after restoring the first snapshot's notes.txt and src in place: %q", got)
	}
	if _, _, err := e.s.RestorePaths(ctx, u, "keeper", "", []string{"/home/user/notes.txt"}, "/home/user/back"); err != nil {
		t.Fatal(err)
	}
	if got := shOn(t, s, boxID, `stat -c %U /home/user/back; cat /home/user/back/home/user/notes.txt /home/user/notes.txt`); got != "user\nwritten just before the save\na second line\nwritten just before the save\n" {
		t.Fatalf("after restoring the newest notes.txt under /home/user/back: %q", got)
	}
	for _, bad := range [][]string{{"/etc/passwd"}, {"/home/user/../../etc/shadow"}, {"home/user/notes.txt"}} {
		if _, _, err := e.s.RestorePaths(ctx, u, "keeper", "", bad, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("restore %v: %v", bad, err)
		}
	}
	if _, _, err := e.s.RestorePaths(ctx, u, "keeper", "", []string{"/home/user/notes.txt"}, "/tmp"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("restore --to /tmp: %v", err)
	}
	if _, _, err := e.s.RestorePaths(WithAgent(ctx, &Agent{}), u, "keeper", "", []string{"/home/user/notes.txt"}, ""); !errors.Is(err, ErrOwnerOnly) {
		t.Fatalf("an agent's restore: %v", err)
	}
}

// tree lists a box's /home/user and /workspace: path, type, owner, mode
// and a link's target, one entry a line, sorted.
const tree = `cd / && find home/user workspace -printf '%p %y %u:%g %m %l\n' | sort`

// shOn is sh on another supervisor.
func shOn(t testing.TB, s sandbox.Supervisor, boxID, line string) string {
	t.Helper()
	out, err := ExecIn(context.Background(), s, boxID, nil, "sh", "-c", line)
	if err != nil {
		t.Fatalf("in %s: %q: %v", boxID, line, err)
	}
	return out
}

// secondSupervisor starts a supervisor beside the package's one: its own
// state directory and bridge (cbboxes3, 10.216.0.1/16), the same images.
func secondSupervisor(t *testing.T) *local.Supervisor {
	t.Helper()
	n := local.DefaultNetwork()
	n.Bridge, n.Gateway = "cbboxes3", netip.MustParsePrefix("10.216.0.1/16")
	s, err := local.New(context.Background(), local.Config{StateDir: filepath.Join(testRoot, "state2"), Images: filepath.Join(testRoot, "images"),
		Network: n, EgressHosts: []string{"deb.debian.org"}, DefaultMaxClaims: 1000,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		_ = os.RemoveAll(filepath.Join(testRoot, "state2"))
	})
	return s
}

func listSnapshots(t *testing.T, st store.Store, uid, box string) []string {
	t.Helper()
	var names []string
	if err := st.List(context.Background(), objects.ManifestsPrefix(uid, box), func(key string) error {
		names = append(names, filepath.Base(key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

func countKeys(t *testing.T, st store.Store, prefix string) int {
	t.Helper()
	n := 0
	if err := st.List(context.Background(), prefix, func(string) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue 42, Deliver 5: a store that is down fails the save with an error
// naming the state store, the box left running, and no disk-level save
// recorded without its snapshot.
func TestSaveFailsWhenTheStoreIsDownAndTheBoxRuns(t *testing.T) {
	ctx := context.Background()
	w := weedtest.Start(t)
	s3, err := store.OpenS3(ctx, w.S3Config)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	state := &State{Store: s3, Keys: func(ctx context.Context, uid string) (*objects.Keys, error) { return objects.NewKeys(uid, key) }}
	e := newEnvWith(t, func(c *Config) { c.State = state })
	u := e.user("stranded", 1, 1)
	b := e.create(u, "stranded")
	w.Kill()
	_, op, err := e.s.Save(ctx, Call{UserID: u, RequestID: rid(), Box: b.Name})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	last, err := e.s.WaitOperation(wctx, u, op.ID, func(*controlv1.Operation) {})
	if err != nil {
		t.Fatal(err)
	}
	if last.Phase != controlv1.Phase_PHASE_FAILED || !strings.Contains(last.Error, "save into the state store") {
		t.Fatalf("a save with the store down ended %s: %q", last.Phase, last.Error)
	}
	t.Logf("the failed save said: %s", last.Error)
	after := e.box(u, b.ID)
	if after.State != Running || after.SaveID != "" {
		t.Fatalf("after the failed save: state %s, save %q", after.State, after.SaveID)
	}
	if got := sh(t, b.ID, "echo still here"); got != "still here\n" {
		t.Fatalf("the box after the failed save: %q", got)
	}
}
