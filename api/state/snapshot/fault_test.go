package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// failingStore fails every Put from the after-th on (0: none), or with
// only the after-th alone, and Sync when failSync is set: a save killed or
// a store gone at that step, or one put lost on the way.
type failingStore struct {
	store.Store
	after    int64
	only     bool
	puts     atomic.Int64
	failSync bool
}

var errInjected = errors.New("injected: the store went away")

func (f *failingStore) Put(ctx context.Context, key string, data []byte) error {
	if n := f.puts.Add(1); f.after > 0 && (n == f.after || n > f.after && !f.only) {
		return fmt.Errorf("put %s: %w", key, errInjected)
	}
	return f.Store.Put(ctx, key, data)
}

func (f *failingStore) Sync(ctx context.Context) error {
	if f.failSync {
		return errInjected
	}
	return f.Store.Sync(ctx)
}

// Issue 42, Deliver 5: a save cut at each of its steps (every chunk's put,
// the manifest's put, either sync), or losing that one put alone, fails
// naming the cause, leaves the
// previous snapshot whole and no manifest of its own, so no manifest
// names a chunk the store lacks; the next save then succeeds.
func TestASaveCutAtEachStepLeavesThePreviousSnapshotWhole(t *testing.T) {
	ctx := context.Background()
	st, k := setup(t)
	src := tree(t)
	m1, _, err := Save(ctx, st, k, src, paths, "box1", "s1", nil, 0, Options{Skip: skipSecrets})
	must(t, err)
	// A twin store, given the same first snapshot, counts the second
	// save's steps: its puts, the manifest's the last.
	twin, _ := setup(t)
	_, _, err = Save(ctx, twin, k, src, paths, "box1", "s1", nil, 0, Options{Skip: skipSecrets})
	must(t, err)
	for i := range 3 {
		must(t, os.WriteFile(filepath.Join(src, "workspace/proj", fmt.Sprintf("new%d.bin", i)), random(byte(10+i), 3<<20), 0o644))
	}
	counter := &failingStore{Store: twin}
	_, _, err = Save(ctx, counter, k, src, paths, "box1", "s2", m1, 0, Options{Skip: skipSecrets})
	must(t, err)
	steps := counter.puts.Load()
	if steps < 4 {
		t.Fatalf("a save of the changed tree made %d puts; the test needs several", steps)
	}
	// Each cut runs on a copy of the store as the first save left it.
	cases := []*failingStore{{Store: copyStore(t, st), failSync: true}}
	for n := int64(1); n <= steps; n++ {
		cases = append(cases, &failingStore{Store: copyStore(t, st), after: n}, &failingStore{Store: copyStore(t, st), after: n, only: true})
	}
	for _, f := range cases {
		st := f.Store
		_, _, err := Save(ctx, f, k, src, paths, "box1", "s2", m1, 0, Options{Skip: skipSecrets, Uploads: 1})
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "box1/s2") {
			t.Fatalf("a save cut at put %d (only it: %v; sync %v): %v; want the injected error, naming the snapshot", f.after, f.only, f.failSync, err)
		}
		if f.failSync || f.after < steps || f.only {
			if ok, _ := st.Has(ctx, k.ManifestKey("box1", "s2")); ok {
				t.Fatalf("a save cut at put %d (sync %v) left a manifest", f.after, f.failSync)
			}
		}
		got, _, err := Load(ctx, st, k, "box1", "s1")
		if err != nil || len(got.Entries) != len(m1.Entries) {
			t.Fatalf("the previous snapshot after a save cut at put %d: %v", f.after, err)
		}
		checkManifestsWhole(t, st, k)
	}
	// After a cut, the next save succeeds (on the last cut's store).
	last := cases[len(cases)-1].Store
	m2, _, err := Save(ctx, last, k, src, paths, "box1", "s2", m1, 0, Options{Skip: skipSecrets})
	must(t, err)
	restoresAs(t, last, k, m2, src)
}

// copyStore is a new embedded store holding what st holds.
func copyStore(t *testing.T, st store.Store) store.Store {
	t.Helper()
	out, _ := setup(t)
	ctx := context.Background()
	err := st.List(ctx, "00000000-0000-4000-8000-00000000000a/", func(key string) error {
		data, err := st.Get(ctx, key)
		if err != nil {
			return err
		}
		return out.Put(ctx, key, data)
	})
	must(t, err)
	return out
}

// checkManifestsWhole holds that every chunk each stored manifest of box1
// names is in the store.
func checkManifestsWhole(t *testing.T, st store.Store, k *objects.Keys) {
	t.Helper()
	ctx := context.Background()
	err := st.List(ctx, objects.ManifestsPrefix(k.UID(), "box1"), func(key string) error {
		snap := key[strings.LastIndexByte(key, '/')+1:]
		m, _, err := Load(ctx, st, k, "box1", snap)
		if err != nil {
			return err
		}
		for _, e := range m.Entries {
			for _, id := range e.Chunks {
				if ok, err := st.Has(ctx, k.ChunkKey(id)); !ok || err != nil {
					return fmt.Errorf("manifest %s names %s's chunk %s, which the store lacks", snap, e.Path, id)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
