package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/state"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/snapshot"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/api/state/store/weedtest"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// eachStore runs f against the api's embedded store and against S3 on a
// real SeaweedFS (weed, built by make setup; missing, the test fails),
// each api built as the binary builds it.
func eachStore(t *testing.T, f func(t *testing.T, a *apitest.API)) {
	t.Run("embedded", func(t *testing.T) { f(t, apitest.New(t, apitest.WithoutSession())) })
	t.Run("s3", func(t *testing.T) {
		w := weedtest.Start(t)
		f(t, apitest.New(t, apitest.WithoutSession(), apitest.WithConfig(func(c *config.Config) {
			c.State.Store = "s3"
			c.State.S3 = config.StateS3{Endpoint: w.Endpoint, Bucket: w.Bucket, URLStyle: "path", CredentialsFile: w.CredentialsFile, Profile: w.Profile}
		})))
	})
}

// gcFixture is a user's keys (fixed, not the vault's) and a collector
// of a's store with them. The api's own collector has made its first
// pass (its next is an hour away), so it is not the one a test sees.
type gcFixture struct {
	a   *apitest.API
	k   *objects.Keys
	uid string
}

func newFixture(t *testing.T, a *apitest.API) *gcFixture {
	wait.Eventually(t, time.Minute, "the api's own first gc pass", func() (bool, string) {
		return a.StateGC.Totals().Passes >= 1, fmt.Sprintf("%+v", a.StateGC.Totals())
	})
	k, err := objects.NewKeys(a.User.ID, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return &gcFixture{a: a, k: k, uid: a.User.ID}
}

func (f *gcFixture) collector(r state.Retention, now func() time.Time) *state.Collector {
	return state.NewCollector(state.CollectorOptions{Pool: f.a.DB.Pool, Store: f.a.State, Retention: r, Now: now,
		Keys: func(context.Context, string) (*objects.Keys, error) { return f.k, nil }, Log: discard})
}

// save saves root's home/user as box's snapshot name, a delta of the
// box's newest snapshot when it has one, under the user's state lock as
// box saves do; opts.Listed is the test's gate.
func (f *gcFixture) save(t *testing.T, root, box, name string, opts snapshot.Options) *objects.Manifest {
	t.Helper()
	m, err := f.trySave(root, box, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *gcFixture) trySave(root, box, name string, opts snapshot.Options) (*objects.Manifest, error) {
	ctx := context.Background()
	var m *objects.Manifest
	err := state.Shared(ctx, f.a.DB.Pool, f.uid, func(ctx context.Context) error {
		var parent *objects.Manifest
		depth := 0
		prev, err := newest(f.a.State, f.uid, box)
		if err != nil {
			return err
		}
		if prev != "" {
			if parent, depth, err = snapshot.Load(ctx, f.a.State, f.k, box, prev); err != nil {
				return err
			}
		}
		m, _, err = snapshot.Save(ctx, f.a.State, f.k, root, []string{"home/user"}, box, name, parent, depth, opts)
		return err
	})
	return m, err
}

func listSnapshots(st store.Store, uid, box string) ([]string, error) {
	var out []string
	err := st.List(context.Background(), objects.ManifestsPrefix(uid, box), func(k string) error {
		out = append(out, filepath.Base(k))
		return nil
	})
	slices.Sort(out)
	return out, err
}

func snapshotsOf(t *testing.T, st store.Store, uid, box string) []string {
	out, err := listSnapshots(st, uid, box)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func newest(st store.Store, uid, box string) (string, error) {
	names, err := listSnapshots(st, uid, box)
	if len(names) == 0 {
		return "", err
	}
	return names[len(names)-1], err
}

// missingChunks names every chunk a stored snapshot of box needs that
// the store lacks, each snapshot loaded whole (its deltas applied).
func (f *gcFixture) missingChunks(t *testing.T, box string) []string {
	ctx := context.Background()
	var missing []string
	for _, n := range snapshotsOf(t, f.a.State, f.uid, box) {
		m, _, err := snapshot.Load(ctx, f.a.State, f.k, box, n)
		if err != nil {
			t.Fatalf("snapshot %s does not load: %v", n, err)
		}
		for _, e := range m.Entries {
			for _, id := range e.Chunks {
				if ok, err := f.a.State.Has(ctx, f.k.ChunkKey(id)); err != nil || !ok {
					missing = append(missing, fmt.Sprintf("%s: %s's chunk %s (%v)", n, e.Path, id[:12], err))
				}
			}
		}
	}
	return missing
}

func (f *gcFixture) has(t *testing.T, id string) bool {
	ok, err := f.a.State.Has(context.Background(), f.k.ChunkKey(id))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// putChunk stores data as a chunk that no manifest names (a save cut
// short, or a snapshot retention dropped), answering its id.
func (f *gcFixture) putChunk(t *testing.T, data []byte) string {
	id, sealed := f.k.SealChunk(data)
	if err := f.a.State.Put(context.Background(), f.k.ChunkKey(id), sealed); err != nil {
		t.Fatal(err)
	}
	return id
}

var discard = slog.New(slog.DiscardHandler)

func home(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "home/user"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, root, files)
	return root
}

func write(t *testing.T, root string, files map[string]string) {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, "home/user", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gcWaiting says whether a session of a's database waits for an
// exclusive advisory lock: the GC, held by the save's shared one (the
// cluster is shared with other tests' databases).
func gcWaiting(t *testing.T, a *apitest.API) (bool, string) {
	var n int
	if err := a.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND NOT granted
 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0, fmt.Sprintf("%d sessions wait for an exclusive advisory lock", n)
}

// Issue 42, Must show: GC under a concurrent save. A save is held (by
// the test's gate) right after it listed the store's chunks, where it
// decided that a chunk no manifest names yet (its file's content, left
// by a save cut short) is stored and will not be put. A GC started then
// waits for the save's lock instead of deleting that chunk under it; let
// go, the save puts its manifest, the GC runs, and every chunk of every
// snapshot is there while the chunk nothing names is gone.
func TestGCUnderAConcurrentSave(t *testing.T) {
	eachStore(t, func(t *testing.T, a *apitest.API) {
		f := newFixture(t, a)
		ctx := context.Background()
		root := home(t, map[string]string{"a.txt": "first file", "b.txt": "second file"})
		f.save(t, root, "box", "s1", snapshot.Options{})
		orphan := f.putChunk(t, []byte("a chunk a cut save left, which the next save finds stored"))
		garbage := f.putChunk(t, []byte("a chunk nothing will name"))
		write(t, root, map[string]string{"c.txt": "a chunk a cut save left, which the next save finds stored"})

		listed, gate := make(chan struct{}), make(chan struct{})
		saved := make(chan error, 1)
		var m *objects.Manifest
		go func() {
			var err error
			m, err = f.trySave(root, "box", "s2", snapshot.Options{Listed: func() { close(listed); <-gate }})
			saved <- err
		}()
		<-listed
		type answer struct {
			r   state.Result
			err error
		}
		collected := make(chan answer, 1)
		gc := f.collector(state.Retention{Keep: 10}, nil)
		go func() {
			r, err := gc.CollectUser(ctx, f.uid)
			collected <- answer{r, err}
		}()
		wait.Eventually(t, time.Minute, "the GC waiting for the save's lock", func() (bool, string) {
			if len(collected) > 0 {
				return true, "" // it did not wait: failed below
			}
			return gcWaiting(t, a)
		})
		if len(collected) > 0 {
			t.Error("the GC ran beside a save that had listed the chunks")
		}
		close(gate)
		if err := <-saved; err != nil {
			t.Fatal(err)
		}
		got := <-collected
		if got.err != nil {
			t.Fatal(got.err)
		}
		if missing := f.missingChunks(t, "box"); len(missing) > 0 {
			t.Fatalf("after the GC beside a save, snapshots name missing chunks: %q", missing)
		}
		if !f.has(t, orphan) {
			t.Fatal("the chunk the save counted on is gone")
		}
		if f.has(t, garbage) {
			t.Fatal("the chunk nothing names is still stored")
		}
		if got.r.Chunks != 1 {
			t.Fatalf("the GC deleted %d chunks, want the 1 nothing names: %+v", got.r.Chunks, got.r)
		}
		// The restore of the held save's snapshot brings c.txt back.
		dest := t.TempDir()
		if err := state.Shared(ctx, a.DB.Pool, f.uid, func(ctx context.Context) error {
			_, err := snapshot.Restore(ctx, a.State, f.k, m, dest, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dest, "home/user/c.txt")); err != nil || !bytes.Contains(b, []byte("cut save")) {
			t.Fatalf("c.txt restored: %q, %v", b, err)
		}
	})
}

// A GC that finds the user's lock held past its wait leaves the user for
// the next pass (ErrBusy), deleting nothing.
func TestAGCThatCannotLockTheUserLeavesItForTheNextPass(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession())
	f := newFixture(t, a)
	garbage := f.putChunk(t, []byte("unnamed"))
	gc := state.NewCollector(state.CollectorOptions{Pool: a.DB.Pool, Store: a.State, Retention: state.Retention{Keep: 1}, LockWait: 50 * time.Millisecond,
		Keys: func(context.Context, string) (*objects.Keys, error) { return f.k, nil }, Log: discard})
	err := state.Shared(context.Background(), a.DB.Pool, f.uid, func(ctx context.Context) error {
		_, err := gc.CollectUser(ctx, f.uid)
		return err
	})
	if !errors.Is(err, state.ErrBusy) {
		t.Fatalf("a GC beside a held lock: %v, want ErrBusy", err)
	}
	if !f.has(t, garbage) {
		t.Fatal("the GC that did not get the lock deleted a chunk")
	}
	if _, err := gc.CollectUser(context.Background(), f.uid); err != nil {
		t.Fatal(err)
	}
	if f.has(t, garbage) {
		t.Fatal("the next pass left the chunk nothing names")
	}
}

// Retention keeps a box name's newest Keep snapshots and what a kept
// delta needs: s1 full, s2 to s5 each a delta changing one file; with
// Keep 2, s4 (a delta of s3, which goes) is folded into a full manifest
// and s5 stays a delta of it; both load to the trees they were saved as,
// and the chunks only s1 to s3 named are gone. Then by age: a pass two
// hours on with MaxAge 1h drops s4, folds s5 and keeps it, the newest.
func TestRetentionKeepsTheNewestAndWhatAKeptDeltaNeeds(t *testing.T) {
	eachStore(t, func(t *testing.T, a *apitest.API) {
		f := newFixture(t, a)
		ctx := context.Background()
		root := home(t, map[string]string{"same.txt": "never changes", "v.txt": "version 1"})
		saved := map[string]*objects.Manifest{}
		versions := map[string]string{}
		for i := 1; i <= 5; i++ {
			name := fmt.Sprintf("s%d", i)
			data := fmt.Sprintf("version %d", i)
			write(t, root, map[string]string{"v.txt": data})
			// A new mtime, so the save reads the file again.
			when := time.Date(2026, 1, i, 0, 0, 0, 0, time.UTC)
			if err := os.Chtimes(filepath.Join(root, "home/user/v.txt"), when, when); err != nil {
				t.Fatal(err)
			}
			saved[name] = f.save(t, root, "box", name, snapshot.Options{})
			versions[name], _ = f.k.SealChunk([]byte(data))
		}
		kind := func(name string) *objects.Manifest {
			sealed, err := a.State.Get(ctx, f.k.ManifestKey("box", name))
			if err != nil {
				t.Fatal(err)
			}
			m, err := f.k.OpenManifest("box", name, sealed)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		if m := kind("s4"); m.Kind != objects.Delta || m.Parent != "s3" {
			t.Fatalf("s4 as saved: %s of %q, want a delta of s3", m.Kind, m.Parent)
		}
		clock := time.Now()
		r, err := f.collector(state.Retention{Keep: 2, MaxAge: time.Hour}, func() time.Time { return clock }).CollectUser(ctx, f.uid)
		if err != nil {
			t.Fatal(err)
		}
		if got := snapshotsOf(t, a.State, f.uid, "box"); !slices.Equal(got, []string{"s4", "s5"}) {
			t.Fatalf("kept %q, want s4 and s5", got)
		}
		if m := kind("s4"); m.Kind != objects.Full {
			t.Fatalf("s4 after its parent went: %s, want folded full", m.Kind)
		}
		if m := kind("s5"); m.Kind != objects.Delta || m.Parent != "s4" {
			t.Fatalf("s5 after retention: %s of %q, want still a delta of s4", m.Kind, m.Parent)
		}
		for _, name := range []string{"s4", "s5"} {
			m, _, err := snapshot.Load(ctx, a.State, f.k, "box", name)
			if err != nil {
				t.Fatalf("%s after retention: %v", name, err)
			}
			if !slices.EqualFunc(m.Entries, saved[name].Entries, func(x, y objects.Entry) bool { return fmt.Sprint(x) == fmt.Sprint(y) }) {
				t.Fatalf("%s after retention loads\n%v\nwant\n%v", name, m.Entries, saved[name].Entries)
			}
		}
		if missing := f.missingChunks(t, "box"); len(missing) > 0 {
			t.Fatalf("after retention, kept snapshots name missing chunks: %q", missing)
		}
		if r.Snapshots != 3 || r.Folded != 1 {
			t.Fatalf("retention: %+v, want 3 deleted and 1 folded", r)
		}
		for name, id := range versions {
			if want := name == "s4" || name == "s5"; f.has(t, id) != want {
				t.Fatalf("%s's version of v.txt stored: %v, want %v", name, !want, want)
			}
		}

		clock = clock.Add(2 * time.Hour)
		r, err = f.collector(state.Retention{Keep: 2, MaxAge: time.Hour}, func() time.Time { return clock }).CollectUser(ctx, f.uid)
		if err != nil {
			t.Fatal(err)
		}
		if got := snapshotsOf(t, a.State, f.uid, "box"); !slices.Equal(got, []string{"s5"}) || r.Snapshots != 1 || r.Folded != 1 {
			t.Fatalf("two hours on, kept %q (%+v), want s5 alone, folded", got, r)
		}
		m, _, err := snapshot.Load(ctx, a.State, f.k, "box", "s5")
		if err != nil || len(m.Entries) != len(saved["s5"].Entries) {
			t.Fatalf("s5 alone: %v, %v", m, err)
		}
		if f.has(t, versions["s4"]) || !f.has(t, versions["s5"]) || len(f.missingChunks(t, "box")) > 0 {
			t.Fatal("two hours on: s4's version of v.txt stored, or s5's chunks missing")
		}
	})
}

// The api runs the GC itself: at start and every state.gc_every, and for
// a user whose box was saved (boxes.State.Saved is Kick): a chunk
// nothing names leaves the store after a kick, long before the next
// hourly pass, and the pass is counted.
func TestTheApiCollectsUnreferencedChunks(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession())
	wait.Eventually(t, time.Minute, "the api's first gc pass", func() (bool, string) {
		return a.StateGC.Totals().Passes >= 1, fmt.Sprintf("%+v", a.StateGC.Totals())
	})
	chunk := a.User.ID + "/state/chunks/ab/ab" + strings.Repeat("0", 62)
	if err := a.State.Put(context.Background(), chunk, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	a.StateGC.Kick(a.User.ID)
	wait.Eventually(t, time.Minute, "the api's GC deleting a chunk nothing names", func() (bool, string) {
		ok, err := a.State.Has(context.Background(), chunk)
		return err == nil && !ok && a.StateGC.Totals().Chunks == 1, fmt.Sprintf("stored %v (%v), totals %+v", ok, err, a.StateGC.Totals())
	})
}
