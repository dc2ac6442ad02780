package boxes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/snapshot"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// The user's view of a box's snapshots (issue 42, Deliver 4; docs/state.md,
// "The user's view"): Snapshots, BrowseSnapshot and RestorePaths on the
// Boxes service, the owner only.

// ErrOwnerOnly is a call only the box's owner makes (an agent's grant is
// refused): PERMISSION_DENIED.
var ErrOwnerOnly = errors.New("the box's owner only")

// SnapshotInfo is one snapshot of a box name.
type SnapshotInfo struct {
	Name    string
	Created time.Time
	// Files and Bytes count its regular files and their bytes.
	Files, Bytes int64
}

// snapshotsOf resolves ref (a box name, a deleted box's too, or a box
// id; "" the caller's first box) to the name its snapshots are kept
// under, and the caller's state keys.
func (s *Service) snapshotsOf(ctx context.Context, userID, ref string) (string, *objects.Keys, error) {
	if AgentFrom(ctx) != nil {
		return "", nil, fmt.Errorf("snapshots: %w", ErrOwnerOnly)
	}
	if s.state == nil {
		return "", nil, fmt.Errorf("snapshots: this api has no state store: %w", ErrUnavailable)
	}
	name := ref
	if ref == "" || IsBoxID(ref) {
		b, err := findBox(ctx, s.pool, userID, ref, false)
		if err != nil {
			return "", nil, err
		}
		name = b.Name
	} else if err := CheckName(ref); err != nil {
		return "", nil, err
	}
	k, err := s.state.Keys(ctx, userID)
	if err != nil {
		return "", nil, fmt.Errorf("the user's state key: %w", err)
	}
	return name, k, nil
}

// Snapshots answers the snapshots of box's name, oldest first.
func (s *Service) Snapshots(ctx context.Context, userID, box string) ([]SnapshotInfo, error) {
	name, k, err := s.snapshotsOf(ctx, userID, box)
	if err != nil {
		return nil, err
	}
	var out []SnapshotInfo
	err = s.lockedState(ctx, userID, func(ctx context.Context) error {
		out, err = s.snapshots(ctx, userID, name, k)
		return err
	})
	return out, err
}

func (s *Service) snapshots(ctx context.Context, userID, name string, k *objects.Keys) ([]SnapshotInfo, error) {
	var names []string
	if err := s.state.Store.List(ctx, objects.ManifestsPrefix(userID, name), func(key string) error {
		names = append(names, path.Base(key))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("the snapshots of %s: %w", name, err)
	}
	var out []SnapshotInfo
	for _, n := range names {
		m, _, err := snapshot.Load(ctx, s.state.Store, k, name, n)
		if err != nil {
			return nil, err
		}
		info := SnapshotInfo{Name: n, Created: m.Created}
		for _, e := range m.Entries {
			if e.Type == objects.TypeFile {
				info.Files++
				info.Bytes += e.Size
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// loadSnapshot loads snapshot snap of name (the newest when empty).
func (s *Service) loadSnapshot(ctx context.Context, userID, name string, k *objects.Keys, snap string) (*objects.Manifest, error) {
	if snap == "" {
		var err error
		if snap, err = latestSnapshot(ctx, s.state.Store, userID, name, ""); err != nil {
			return nil, fmt.Errorf("the snapshots of %s: %w", name, err)
		}
		if snap == "" {
			return nil, fmt.Errorf("box %s has no snapshot (box save makes one): %w", name, ErrNotFound)
		}
	} else if err := objects.CheckName("snapshot", snap); err != nil {
		return nil, invalid("snapshot", "%v", err)
	}
	m, _, err := snapshot.Load(ctx, s.state.Store, k, name, snap)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("box %s has no snapshot %s (box snapshots %s lists them): %w", name, snap, name, ErrNotFound)
	}
	return m, err
}

// treePath checks a path a user names in a snapshot: absolute, clean,
// under /home/user or /workspace; it answers the manifest's path.
func treePath(field, p string) (string, error) {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return "", invalid(field, "%q is not an absolute, clean path", p)
	}
	rel := p[1:]
	for _, d := range sandbox.TreeDirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return rel, nil
		}
	}
	return "", invalid(field, "%q is outside /home/user and /workspace, the only paths a snapshot holds", p)
}

// BrowseSnapshot answers the entries of snapshot snap of box (the newest
// when empty) at p ("" is /home/user) and directly under it.
func (s *Service) BrowseSnapshot(ctx context.Context, userID, box, snap, p string) (string, []objects.Entry, error) {
	if p == "" {
		p = "/home/user"
	}
	rel, err := treePath("path", p)
	if err != nil {
		return "", nil, err
	}
	name, k, err := s.snapshotsOf(ctx, userID, box)
	if err != nil {
		return "", nil, err
	}
	var m *objects.Manifest
	if err := s.lockedState(ctx, userID, func(ctx context.Context) error {
		m, err = s.loadSnapshot(ctx, userID, name, k, snap)
		return err
	}); err != nil {
		return "", nil, err
	}
	var out []objects.Entry
	for _, e := range m.Entries {
		if e.Path == rel || path.Dir(e.Path) == rel {
			out = append(out, e)
		}
	}
	if len(out) == 0 || out[0].Path != rel {
		return m.Snapshot, nil, fmt.Errorf("snapshot %s of %s has no %s: %w", m.Snapshot, name, p, ErrNotFound)
	}
	return m.Snapshot, out, nil
}

// RestorePaths writes paths of snapshot snap of box (the newest when
// empty), each with all under it, into the running box: in place, or
// under to (made as the box's user when missing). The files are streamed
// as a tar (snapshot.WriteTar) into GNU tar run as root in the box, so
// owners, modes, times and xattrs come back as saved, without a reboot.
func (s *Service) RestorePaths(ctx context.Context, userID, box, snap string, paths []string, to string) (string, snapshot.Stats, error) {
	var stats snapshot.Stats
	if len(paths) == 0 {
		return "", stats, invalid("paths", "name at least one path to restore")
	}
	rels := make([]string, len(paths))
	for i, p := range paths {
		var err error
		if rels[i], err = treePath(fmt.Sprintf("paths[%d]", i), p); err != nil {
			return "", stats, err
		}
	}
	dir := "/"
	if to != "" {
		if _, err := treePath("to", to); err != nil {
			return "", stats, err
		}
		dir = to
	}
	if AgentFrom(ctx) != nil {
		return "", stats, fmt.Errorf("restore: %w", ErrOwnerOnly)
	}
	b, err := findBox(ctx, s.pool, userID, box, false)
	if err != nil {
		return "", stats, err
	}
	if b.State != Running {
		return "", stats, fmt.Errorf("box %s is %s; restore writes into a running box (box start %s first): %w", b.Name, b.State, b.Name, ErrNotRunning)
	}
	name, k, err := s.snapshotsOf(ctx, userID, b.ID)
	if err != nil {
		return "", stats, err
	}
	var got string
	err = s.lockedState(ctx, userID, func(ctx context.Context) error {
		got, stats, err = s.restorePaths(ctx, b, name, k, snap, rels, paths, dir)
		return err
	})
	return got, stats, err
}

// restorePaths is RestorePaths under the user's state lock: the snapshot
// and its chunks stay while they are read.
func (s *Service) restorePaths(ctx context.Context, b *Box, name string, k *objects.Keys, snap string, rels, paths []string, dir string) (string, snapshot.Stats, error) {
	var stats snapshot.Stats
	m, err := s.loadSnapshot(ctx, b.UserID, name, k, snap)
	if err != nil {
		return "", stats, err
	}
	for i, rel := range rels {
		if !slicesContainsPath(m, rel) {
			return m.Snapshot, stats, fmt.Errorf("snapshot %s of %s has no %s: %w", m.Snapshot, name, paths[i], ErrNotFound)
		}
	}
	keep := func(p string) bool {
		for _, rel := range rels {
			if p == rel || strings.HasPrefix(p, rel+"/") {
				return true
			}
		}
		return false
	}
	sup, ok := s.hosts[b.Host]
	if !ok {
		return m.Snapshot, stats, fmt.Errorf("box %s is on host %s, which this api does not reach: %w", b.Name, b.Host, ErrUnavailable)
	}
	if dir != "/" {
		if _, err := execIn(ctx, sup, b.ID, "user", nil, nil, nil, "mkdir", "-p", "--", dir); err != nil {
			return m.Snapshot, stats, fmt.Errorf("make %s in the box: %w", dir, err)
		}
	}
	p, err := sup.Exec(ctx, b.ID, sandbox.ExecRequest{Args: append(append([]string{}, snapshot.TarExtract...), dir)})
	if err != nil {
		return m.Snapshot, stats, supervisorError(err)
	}
	var werr error
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		stats, werr = snapshot.WriteTar(ctx, s.state.Store, k, m, keep, "", p.Stdin())
		p.Stdin().Close()
	}()
	var stderr strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, p.Stderr()); close(done) }()
	_, _ = io.Copy(io.Discard, p.Stdout())
	<-done
	st, err := p.Wait()
	<-wrote
	if err != nil {
		return m.Snapshot, stats, supervisorError(err)
	}
	if werr != nil {
		return m.Snapshot, stats, fmt.Errorf("restore from snapshot %s: %w", m.Snapshot, werr)
	}
	if st.Code != 0 {
		return m.Snapshot, stats, fmt.Errorf("tar in the box exited %d: %s", st.Code, strings.TrimSpace(stderr.String()))
	}
	return m.Snapshot, stats, nil
}

func slicesContainsPath(m *objects.Manifest, rel string) bool {
	for _, e := range m.Entries {
		if e.Path == rel {
			return true
		}
	}
	return false
}
