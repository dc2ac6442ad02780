package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// Load is box's snapshot as a full manifest: the stored one, or the
// chain of deltas back to a full one applied in turn (at most
// objects.MaxDepth+1 objects). depth is the stored manifest's Depth (0:
// stored full), which the next save's delta counts on.
func Load(ctx context.Context, st store.Store, k *objects.Keys, box, snapshot string) (m *objects.Manifest, depth int, err error) {
	var chain []*objects.Manifest
	for name := snapshot; ; {
		if len(chain) > objects.MaxDepth {
			return nil, 0, fmt.Errorf("snapshot %s/%s: more than %d deltas: %w", box, snapshot, objects.MaxDepth, objects.ErrCorrupt)
		}
		sealed, err := st.Get(ctx, k.ManifestKey(box, name))
		if err != nil {
			return nil, 0, fmt.Errorf("snapshot %s/%s: %w", box, snapshot, err)
		}
		m, err := k.OpenManifest(box, name, sealed)
		if err != nil {
			return nil, 0, err
		}
		chain = append(chain, m)
		if m.Kind == objects.Full {
			break
		}
		name = m.Parent
	}
	full := chain[len(chain)-1]
	for i := len(chain) - 2; i >= 0; i-- {
		if full, err = objects.Apply(full, chain[i]); err != nil {
			return nil, 0, err
		}
	}
	return full, chain[0].Depth, nil
}

// Restore rebuilds m's entries (those keep says yes to; nil keeps all)
// under dest, an existing directory, through an os.Root: no entry lands
// outside it whatever the manifest's symlinks say. Directories come
// first, then files (four at once), then symlinks and hard links, and the
// directories' metadata last, deepest first; owners, modes, times and
// xattrs are set as saved, and the file system is synced once at the end.
// A chunk missing or corrupt fails the files that need it, each named,
// and the rest is restored; the error joins them.
func Restore(ctx context.Context, st store.Store, k *objects.Keys, m *objects.Manifest, dest string, keep func(rel string) bool) (Stats, error) {
	var stats Stats
	r, err := os.OpenRoot(dest)
	if err != nil {
		return stats, err
	}
	defer r.Close()
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(e objects.Entry, err error) {
		mu.Lock()
		errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
		mu.Unlock()
	}
	var dirs, files, links []objects.Entry
	for _, e := range m.Entries {
		if keep != nil && !keep(e.Path) {
			continue
		}
		switch e.Type {
		case objects.TypeDir:
			dirs = append(dirs, e)
		case objects.TypeFile:
			files = append(files, e)
		default:
			links = append(links, e)
		}
	}
	for _, e := range dirs {
		if err := r.MkdirAll(e.Path, 0o700); err != nil {
			fail(e, err)
		}
	}
	work := make(chan objects.Entry)
	var wg sync.WaitGroup
	for range restoreWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				n, err := writeFile(ctx, st, k, r, e)
				if err == nil {
					err = setMeta(r, e)
				}
				mu.Lock()
				stats.Bytes += n
				stats.Chunks += len(e.Chunks)
				if err == nil {
					stats.Entries++
				}
				mu.Unlock()
				if err != nil {
					fail(e, err)
				}
			}
		}()
	}
	for _, e := range files {
		if ctx.Err() != nil {
			break
		}
		work <- e
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return stats, err
	}
	for _, e := range links {
		err := mkParents(r, e.Path)
		if err == nil && e.Type == objects.TypeSymlink {
			if err = r.Symlink(e.Target, e.Path); err == nil {
				err = r.Lchown(e.Path, int(e.UID), int(e.GID))
			}
		} else if err == nil {
			err = r.Link(e.Link, e.Path)
		}
		if err != nil {
			fail(e, err)
			continue
		}
		stats.Entries++
	}
	slices.Reverse(dirs)
	for _, e := range dirs {
		if err := setMeta(r, e); err != nil {
			fail(e, err)
			continue
		}
		stats.Entries++
	}
	// One sync of the whole file system, not one per file: a restore is
	// whole once this returns.
	d, err := r.Open(".")
	if err == nil {
		err = unix.Syncfs(int(d.Fd()))
		d.Close()
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("sync %s: %w", dest, err))
	}
	return stats, errors.Join(errs...)
}

// restoreWorkers is how many files a restore writes at once: a store's
// round trips overlap (S3's most of all).
const restoreWorkers = 4

// mkParents makes the directories above p that are not there yet (an
// entry restored alone, without its directories' entries).
func mkParents(r *os.Root, p string) error {
	dir := path.Dir(p)
	if dir == "." {
		return nil
	}
	return r.MkdirAll(dir, 0o700)
}

func writeFile(ctx context.Context, st store.Store, k *objects.Keys, r *os.Root, e objects.Entry) (int64, error) {
	if err := mkParents(r, e.Path); err != nil {
		return 0, err
	}
	f, err := r.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, id := range e.Chunks {
		sealed, err := st.Get(ctx, k.ChunkKey(id))
		if err != nil {
			return n, fmt.Errorf("chunk %s: %w", id, err)
		}
		plain, err := k.OpenChunk(id, sealed)
		if err != nil {
			return n, err
		}
		w, err := f.Write(plain)
		n += int64(w)
		if err != nil {
			return n, err
		}
	}
	if n != e.Size {
		return n, fmt.Errorf("%d bytes restored, %d saved: %w", n, e.Size, objects.ErrCorrupt)
	}
	return n, nil
}

// setMeta sets a file's or directory's owner, mode, xattrs and mtime, on
// a descriptor opened without following a symlink.
func setMeta(r *os.Root, e objects.Entry) error {
	f, err := r.OpenFile(e.Path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.Fchown(fd, int(e.UID), int(e.GID)); err != nil {
		return err
	}
	// After the chown, which clears setuid and setgid.
	if err := unix.Fchmod(fd, e.Mode); err != nil {
		return err
	}
	for name, v := range e.Xattrs {
		if !objects.SavedXattr(name) {
			continue
		}
		if err := unix.Fsetxattr(fd, name, v, 0); err != nil {
			return fmt.Errorf("xattr %s: %w", name, err)
		}
	}
	ts := unix.NsecToTimespec(e.MtimeNS)
	return unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), []unix.Timespec{ts, ts}, 0)
}
