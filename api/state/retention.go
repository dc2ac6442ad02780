package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/snapshot"
)

// Retention is how many snapshots of each box name the store keeps and
// for how long (api.yaml's state.retention; docs/state.md, "Retention
// and the GC").
type Retention struct {
	// Keep is how many of a box name's newest snapshots are kept, at
	// least 1. Newest is last in name order: a box save's name begins
	// with its start time (boxes.snapshotName).
	Keep int
	// MaxAge drops a kept snapshot whose manifest was created longer ago
	// than this; 0 drops none by age. A box name's newest snapshot is
	// kept whatever its age: it is what box create NAME --restore brings
	// back, and a box that was not saved for a while must not lose it.
	MaxAge time.Duration
}

// kept answers which of names (one box name's snapshots, sorted) r
// keeps, created answering each one's manifest time, as of now.
func (r Retention) kept(names []string, created map[string]time.Time, now time.Time) map[string]bool {
	out := map[string]bool{}
	for i, n := range slices.Backward(names) {
		newest := i == len(names)-1
		if !newest && (len(names)-i > max(r.Keep, 1) || r.MaxAge > 0 && now.Sub(created[n]) > r.MaxAge) {
			continue
		}
		out[n] = true
	}
	return out
}

// retain applies r to the snapshots of box (names sorted, raw their
// manifests as stored) and answers which it deleted and which it folded.
// A kept delta whose parent goes is first folded: rewritten in place as
// the full manifest it stands for (snapshot.Load), so every kept
// snapshot still loads; only then do the dropped manifests go. Folding
// was chosen over keeping the dropped parents (hidden) because it keeps
// the promise of Keep: what is stored is what is listed, and the chunks
// only the dropped snapshots named are freed at once, for the price of
// one full manifest written per box name and pass at most (a delta
// chain's oldest kept link). A fold that fails (its chain is already
// broken) keeps all of that box name's snapshots and is the error; raw
// is updated with the folded manifests and the deleted ones removed.
func (c *Collector) retain(ctx context.Context, k *objects.Keys, box string, names []string, raw map[string]*objects.Manifest) (deleted, folded int, err error) {
	created := map[string]time.Time{}
	for _, n := range names {
		created[n] = raw[n].Created
	}
	keep := c.ret.kept(names, created, c.now())
	if len(keep) == len(names) {
		return 0, 0, nil
	}
	for _, n := range names { // oldest first: a fold reads its parents, all still there
		m := raw[n]
		if !keep[n] || m.Kind != objects.Delta || keep[m.Parent] {
			continue
		}
		full, _, err := snapshot.Load(ctx, c.store, k, box, n)
		if err != nil {
			return 0, folded, fmt.Errorf("fold %s/%s before its parent %s goes: %w", box, n, m.Parent, err)
		}
		sealed, err := k.SealManifest(full)
		if err != nil {
			return 0, folded, err
		}
		if err := c.store.Put(ctx, k.ManifestKey(box, n), sealed); err != nil {
			return 0, folded, fmt.Errorf("fold %s/%s: %w", box, n, err)
		}
		raw[n] = full
		folded++
	}
	// The folded manifests are durable before what they replace goes.
	if err := c.store.Sync(ctx); err != nil {
		return 0, folded, err
	}
	var errs []error
	for _, n := range names {
		if keep[n] {
			continue
		}
		if err := c.store.Delete(ctx, k.ManifestKey(box, n)); err != nil {
			errs = append(errs, fmt.Errorf("delete snapshot %s/%s: %w", box, n, err))
			continue
		}
		delete(raw, n)
		deleted++
	}
	return deleted, folded, errors.Join(errs...)
}
