package boxes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/state"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/snapshot"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/internal/steps"
)

// State is where box saves go beside the supervisor's disk-level save
// (docs/state.md, "Box saves"; Contract: State objects (agent ↔ api)):
// each save writes the box's /home/user and /workspace into Store as
// chunks and a manifest, and a restore on any host that reaches Store
// rebuilds them from it.
type State struct {
	// Store is the state store (api.yaml's state section).
	Store store.Store
	// Keys answers a user's state keys (the vault's state key; an error
	// fails the save or restore).
	Keys func(ctx context.Context, userID string) (*objects.Keys, error)
	// Saved, when set, is told the user of each save into Store: the
	// api's GC (state.Collector.Kick) sees to the box name's retention.
	Saved func(userID string)
}

// lockedState runs fn holding the user's state lock shared (state.Shared;
// docs/state.md, "Retention and the GC"): every save, restore and browse
// of the store does, so the GC, which holds it exclusive, never deletes a
// chunk or a snapshot one of them has counted on.
func (s *Service) lockedState(ctx context.Context, userID string, fn func(ctx context.Context) error) error {
	return state.Shared(ctx, s.pool, userID, fn)
}

// stateRestore prefixes an operation's restore_save that restores from
// the state store: "state/" and the snapshot's name, where a disk-level
// restore holds the supervisor's save id ("save-…").
const stateRestore = "state/"

// snapshotName is the snapshot an operation saves: its start (UTC, to
// the microsecond the database keeps, so a box's snapshots sort by it,
// two saves within a second too) and its id's hex digits, the same when
// the operation runs again after a crash, so it replaces its own
// snapshot and nobody else's.
func snapshotName(op *Operation) string {
	return op.Started.UTC().Format("20060102T150405.000000Z") + "-" + strings.TrimPrefix(op.ID, "op-")
}

// latestSnapshot answers the name of box's newest snapshot in the store
// that sorts before below ("" for no bound), or "" when it has none.
func latestSnapshot(ctx context.Context, st store.Store, uid, box, below string) (string, error) {
	latest := ""
	err := st.List(ctx, objects.ManifestsPrefix(uid, box), func(key string) error {
		name := path.Base(key)
		if (below == "" || name < below) && name > latest {
			latest = name
		}
		return nil
	})
	return latest, err
}

// saveState writes the box's trees into the state store as the
// operation's snapshot, a delta of the box's newest one: only the chunks
// the store lacks are put, the manifest last, so a save cut short leaves
// the previous snapshot whole. Without a store, or on a supervisor that
// cannot hand its trees over (sandbox.Trees), there is nothing to do.
func (r *run) saveState(ctx context.Context) error {
	st := r.s.state
	trees, ok := r.sup.(sandbox.Trees)
	if st == nil || !ok {
		return nil
	}
	defer steps.Begin(ctx, "state save")()
	k, err := st.Keys(ctx, r.b.UserID)
	if err != nil {
		return fmt.Errorf("the user's state key: %w", err)
	}
	// From the parent's choice to the manifest's put, under the lock.
	if err := r.s.lockedState(ctx, r.b.UserID, func(ctx context.Context) error { return r.saveStateLocked(ctx, st, trees, k) }); err != nil {
		return err
	}
	if st.Saved != nil {
		st.Saved(r.b.UserID)
	}
	return nil
}

func (r *run) saveStateLocked(ctx context.Context, st *State, trees sandbox.Trees, k *objects.Keys) error {
	name := snapshotName(r.op)
	var parent *objects.Manifest
	depth := 0
	prev, err := latestSnapshot(ctx, st.Store, r.b.UserID, r.b.Name, name)
	if err != nil {
		return fmt.Errorf("list the snapshots of %s: %w", r.b.Name, err)
	}
	if prev != "" {
		if parent, depth, err = snapshot.Load(ctx, st.Store, k, r.b.Name, prev); err != nil {
			// A parent that does not open costs a full save, not the save.
			r.s.log.Warn("boxes: the box's last snapshot does not load; saving a full one", "box", r.b.ID, "snapshot", prev, "err", err)
			parent, depth = nil, 0
		}
	}
	var stats snapshot.Stats
	err = trees.ReadTrees(ctx, r.b.ID, func(root string) error {
		skip, err := snapshot.BoxSkip(root)
		if err != nil {
			return err
		}
		_, stats, err = snapshot.Save(ctx, st.Store, k, root, sandbox.TreeDirs, r.b.Name, name, parent, depth, snapshot.Options{Skip: skip})
		return err
	})
	if err != nil {
		return err
	}
	r.s.log.Info("boxes: saved into the state store", "box", r.b.ID, "snapshot", name, "parent", prev,
		"entries", stats.Entries, "chunks", stats.Chunks, "new_chunks", stats.NewChunks, "uploaded", stats.Uploaded, "unchanged", stats.Unchanged)
	return nil
}

// restoreState makes the box's machine from snapshot name of the box's
// name in the state store.
func (r *run) restoreState(ctx context.Context, spec sandbox.Spec, name string) (sandbox.Machine, error) {
	st := r.s.state
	if st == nil {
		return sandbox.Machine{}, errors.New("restore from the state store: this api has no state store")
	}
	trees, ok := r.sup.(sandbox.Trees)
	if !ok {
		return sandbox.Machine{}, fmt.Errorf("restore from the state store: host %s's supervisor cannot restore trees", r.b.Host)
	}
	k, err := st.Keys(ctx, r.b.UserID)
	if err != nil {
		return sandbox.Machine{}, fmt.Errorf("the user's state key: %w", err)
	}
	var mach sandbox.Machine
	err = r.s.lockedState(ctx, r.b.UserID, func(ctx context.Context) error {
		m, _, err := snapshot.Load(ctx, st.Store, k, r.b.Name, name)
		if err != nil {
			return fmt.Errorf("restore from the state store: %w", err)
		}
		mach, err = trees.CreateFilled(ctx, spec, func(root string) error {
			_, err := snapshot.Restore(ctx, st.Store, k, m, root, inTrees)
			return err
		})
		return err
	})
	return mach, err
}

// inTrees says whether a manifest's path is under sandbox.TreeDirs: a
// restore writes nothing else into a disk.
func inTrees(rel string) bool {
	for _, d := range sandbox.TreeDirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// newestSnapshot answers the newest snapshot of the user's box name in
// the state store, "" when it has none or there is no store.
func (s *Service) newestSnapshot(ctx context.Context, userID, name string) (string, error) {
	if s.state == nil {
		return "", nil
	}
	snap, err := latestSnapshot(ctx, s.state.Store, userID, name, "")
	if err != nil {
		return "", fmt.Errorf("restore: the snapshots of %q in the state store: %w", name, err)
	}
	return snap, nil
}
