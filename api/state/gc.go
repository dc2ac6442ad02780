package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// Collector applies retention to every user's snapshots and deletes the
// chunks no kept manifest names (docs/state.md, "Retention and the GC";
// issue 42, Deliver 4). Each user's pass holds the user's state lock
// exclusive (see Shared), so it never runs beside a save that has listed
// the chunks it will skip, on this api or another replica.
type Collector struct {
	pool  *pgxpool.Pool
	store store.Store
	keys  func(ctx context.Context, uid string) (*objects.Keys, error)
	ret   Retention
	wait  time.Duration
	log   *slog.Logger
	now   func() time.Time

	kick    chan struct{}
	mu      sync.Mutex
	pending map[string]bool // users Kick named, for the next pass
	totals  Result
}

// CollectorOptions configure a Collector.
type CollectorOptions struct {
	Pool  *pgxpool.Pool
	Store store.Store
	// Keys answers a user's state keys (the vault's state key).
	Keys      func(ctx context.Context, uid string) (*objects.Keys, error)
	Retention Retention
	// LockWait bounds the wait for a user's state lock (default 1 min):
	// a user whose saves hold it longer is left for the next pass.
	LockWait time.Duration
	Log      *slog.Logger
	// Now is the clock of MaxAge (default time.Now).
	Now func() time.Time
}

// NewCollector is a collector of o.Store's state objects.
func NewCollector(o CollectorOptions) *Collector {
	c := &Collector{pool: o.Pool, store: o.Store, keys: o.Keys, ret: o.Retention, wait: o.LockWait, log: o.Log, now: o.Now,
		kick: make(chan struct{}, 1), pending: map[string]bool{}}
	if c.wait <= 0 {
		c.wait = time.Minute
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Result counts what passes did. Totals sums every pass of a Collector.
type Result struct {
	// Passes run (Collect and the passes Run makes; Users of them).
	Passes, Users int
	// Busy users were left for the next pass (ErrBusy); Failed users
	// had an error (logged), their unreferenced chunks kept when a
	// manifest did not open.
	Busy, Failed int
	// Snapshots deleted by retention; Folded deltas rewritten full.
	Snapshots, Folded int
	// Chunks deleted; Kept chunks some kept manifest names.
	Chunks, Kept int
}

func (r *Result) add(o Result) {
	r.Passes += o.Passes
	r.Users += o.Users
	r.Busy += o.Busy
	r.Failed += o.Failed
	r.Snapshots += o.Snapshots
	r.Folded += o.Folded
	r.Chunks += o.Chunks
	r.Kept += o.Kept
}

// Totals is the sum of every pass's Result so far.
func (c *Collector) Totals() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.totals
}

// Kick asks Run for a pass of uid soon: after a save, which may have
// pushed a box name past Keep.
func (c *Collector) Kick(uid string) {
	c.mu.Lock()
	c.pending[uid] = true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run collects every user at once and every every after, and the users
// Kick names in between, until ctx ends; each pass is logged.
func (c *Collector) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	all := true
	for {
		var uids []string
		if !all {
			c.mu.Lock()
			for uid := range c.pending {
				uids = append(uids, uid)
			}
			clear(c.pending)
			c.mu.Unlock()
		}
		c.pass(ctx, all, uids)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			all = true
		case <-c.kick:
			all = false
		}
	}
}

func (c *Collector) pass(ctx context.Context, all bool, uids []string) {
	var r Result
	var err error
	if all {
		r, err = c.Collect(ctx)
	} else {
		r, err = c.collect(ctx, uids)
	}
	if ctx.Err() != nil {
		return
	}
	attrs := []any{"users", r.Users, "snapshots_deleted", r.Snapshots, "folded", r.Folded, "chunks_deleted", r.Chunks,
		"chunks_kept", r.Kept, "busy", r.Busy, "failed", r.Failed, "store", c.store.String()}
	if err != nil {
		c.log.Warn("state: gc", append(attrs, "err", err)...)
		return
	}
	c.log.Info("state: gc", attrs...)
}

// Collect runs a pass over every user: retention, then their
// unreferenced chunks deleted. A user that fails does not stop the
// others; the error joins theirs (ErrBusy users are counted, not errors).
func (c *Collector) Collect(ctx context.Context) (Result, error) {
	rows, err := c.pool.Query(ctx, "SELECT id::text FROM users ORDER BY id")
	if err != nil {
		return Result{}, fmt.Errorf("gc: list users: %w", err)
	}
	var uids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return Result{}, err
		}
		uids = append(uids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Result{}, fmt.Errorf("gc: list users: %w", err)
	}
	return c.collect(ctx, uids)
}

func (c *Collector) collect(ctx context.Context, uids []string) (Result, error) {
	r := Result{Passes: 1}
	var errs []error
	for _, uid := range uids {
		u, err := c.CollectUser(ctx, uid)
		r.add(u)
		r.Users++
		switch {
		case errors.Is(err, ErrBusy):
			r.Busy++
		case err != nil:
			r.Failed++
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	c.mu.Lock()
	c.totals.add(r)
	c.mu.Unlock()
	return r, errors.Join(errs...)
}

// CollectUser is one user's pass, under the user's state lock held
// exclusive (ErrBusy when a save or restore held it for the whole
// LockWait): the user's manifests are listed and opened, retention
// deletes the snapshots it drops (folding a kept delta whose parent
// goes), and every chunk no remaining manifest names is deleted. The
// manifests and chunks are listed after the lock is taken, so a save
// that ended before counts, and none runs beside it. A manifest that
// does not open leaves every chunk of the user in place (what it names
// is unknown) and is the error.
func (c *Collector) CollectUser(ctx context.Context, uid string) (Result, error) {
	var r Result
	err := exclusive(ctx, c.pool, uid, c.wait, func(ctx context.Context) error {
		var err error
		r, err = c.collectLocked(ctx, uid)
		return err
	})
	if err != nil && !errors.Is(err, ErrBusy) {
		err = fmt.Errorf("gc of %s: %w", uid, err)
	}
	return r, err
}

func (c *Collector) collectLocked(ctx context.Context, uid string) (Result, error) {
	var r Result
	boxes := map[string][]string{} // box name → its snapshots
	mp := objects.AllManifestsPrefix(uid)
	if err := c.store.List(ctx, mp, func(key string) error {
		box, snap, ok := strings.Cut(strings.TrimPrefix(key, mp), "/")
		if ok && !strings.Contains(snap, "/") {
			boxes[box] = append(boxes[box], snap)
		}
		return nil
	}); err != nil {
		return r, fmt.Errorf("list manifests: %w", err)
	}
	chunks := map[string]string{} // id → key
	if err := c.store.List(ctx, objects.ChunksPrefix(uid), func(key string) error {
		chunks[path.Base(key)] = key
		return nil
	}); err != nil {
		return r, fmt.Errorf("list chunks: %w", err)
	}
	if len(boxes) == 0 && len(chunks) == 0 {
		return r, nil
	}
	k, err := c.keys(ctx, uid)
	if err != nil {
		return r, fmt.Errorf("the state key: %w", err)
	}
	raw := map[string]map[string]*objects.Manifest{} // box → snapshot → manifest as stored
	for box, names := range boxes {
		slices.Sort(names)
		raw[box] = map[string]*objects.Manifest{}
		for _, n := range names {
			sealed, err := c.store.Get(ctx, k.ManifestKey(box, n))
			if err != nil {
				return r, fmt.Errorf("manifest %s/%s: %w", box, n, err)
			}
			m, err := k.OpenManifest(box, n, sealed)
			if err != nil {
				return r, fmt.Errorf("manifest %s/%s (its chunks unknown, none deleted): %w", box, n, err)
			}
			raw[box][n] = m
		}
	}
	var errs []error
	for box, names := range boxes {
		d, f, err := c.retain(ctx, k, box, names, raw[box])
		r.Snapshots += d
		r.Folded += f
		if err != nil {
			errs = append(errs, err)
		}
	}
	// What every manifest still stored names, a kept delta's own entries
	// included: the union of their entries is the union of the kept
	// snapshots' trees (a delta's entries are its tree's changed paths).
	named := map[string]bool{}
	for _, snaps := range raw {
		for _, m := range snaps {
			for _, e := range m.Entries {
				for _, id := range e.Chunks {
					named[id] = true
				}
			}
		}
	}
	for id, key := range chunks {
		if named[id] {
			r.Kept++
			continue
		}
		if err := c.store.Delete(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("delete chunk %s: %w", id, err))
			continue
		}
		r.Chunks++
	}
	if r.Snapshots > 0 || r.Chunks > 0 {
		c.log.Info("state: gc of a user", "user", uid, "snapshots_deleted", r.Snapshots, "folded", r.Folded,
			"chunks_deleted", r.Chunks, "chunks_kept", r.Kept)
	}
	return r, errors.Join(errs...)
}
