package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"

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
// outside it whatever the manifest's symlinks say. Owners, modes, times
// and xattrs are set as saved. A chunk missing or corrupt in the store
// fails the files that need it, each named, and the rest is restored;
// the error joins them.
func Restore(ctx context.Context, st store.Store, k *objects.Keys, m *objects.Manifest, dest string, keep func(rel string) bool) (Stats, error) {
	var stats Stats
	r, err := os.OpenRoot(dest)
	if err != nil {
		return stats, err
	}
	defer r.Close()
	var errs []error
	var dirs []objects.Entry
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		if keep != nil && !keep(e.Path) {
			continue
		}
		if err := mkParents(r, e.Path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
			continue
		}
		var err error
		switch e.Type {
		case objects.TypeDir:
			if err = r.Mkdir(e.Path, 0o700); errors.Is(err, fs.ErrExist) {
				err = nil
			}
			dirs = append(dirs, e) // metadata once what it holds is in
		case objects.TypeSymlink:
			if err = r.Symlink(e.Target, e.Path); err == nil {
				err = r.Lchown(e.Path, int(e.UID), int(e.GID))
			}
		case objects.TypeHardlink:
			err = r.Link(e.Link, e.Path)
		case objects.TypeFile:
			var n int64
			n, err = writeFile(ctx, st, k, r, e)
			stats.Bytes += n
			stats.Chunks += len(e.Chunks)
		}
		if err == nil && e.Type == objects.TypeFile {
			err = setMeta(r, e)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
			continue
		}
		stats.Entries++
	}
	slices.Reverse(dirs)
	for _, e := range dirs {
		if err := setMeta(r, e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Path, err))
		}
	}
	return stats, errors.Join(errs...)
}

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
	return n, f.Sync()
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
