package snapshot

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// WriteTar writes m's entries that keep says yes to (with the
// directories above each, so an extraction makes them as saved) to w as
// a tar stream for GNU tar to extract as root (--numeric-owner
// --same-owner --same-permissions --xattrs): owners, modes, times,
// symlinks, xattrs (as SCHILY.xattr.* records) and file content from the
// store. Each entry's name is under prefix ("" for the root: the path
// as saved, home/user/notes.txt). A hard link whose file is not written
// is written as a file. The first chunk missing or corrupt ends the
// stream with an error naming the file: a half-restored file is not left
// to look whole. RestorePaths' stream (docs/state.md, The user's view).
func WriteTar(ctx context.Context, st store.Store, k *objects.Keys, m *objects.Manifest, keep func(rel string) bool, prefix string, w io.Writer) (Stats, error) {
	var stats Stats
	byPath := make(map[string]*objects.Entry, len(m.Entries))
	for i := range m.Entries {
		byPath[m.Entries[i].Path] = &m.Entries[i]
	}
	// The kept entries and every directory above them, in the manifest's
	// order (byte order of path: a parent before what is under it).
	want := map[string]bool{}
	for _, e := range m.Entries {
		if !keep(e.Path) {
			continue
		}
		want[e.Path] = true
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			if byPath[d] != nil {
				want[d] = true
			}
		}
	}
	tw := tar.NewWriter(w)
	for _, e := range m.Entries {
		if !want[e.Path] {
			continue
		}
		h := &tar.Header{Name: path.Join(prefix, e.Path), Mode: int64(e.Mode), Uid: int(e.UID), Gid: int(e.GID),
			ModTime: time.Unix(0, e.MtimeNS), Format: tar.FormatPAX}
		for name, v := range e.Xattrs {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords["SCHILY.xattr."+name] = string(v) // binary as it is, as GNU tar writes it
		}
		src := &e
		switch e.Type {
		case objects.TypeDir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case objects.TypeSymlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
		case objects.TypeHardlink:
			if want[e.Link] {
				h.Typeflag, h.Linkname = tar.TypeLink, path.Join(prefix, e.Link)
				break
			}
			if src = byPath[e.Link]; src == nil {
				return stats, fmt.Errorf("%s: a hard link to %s, which the snapshot lacks: %w", e.Path, e.Link, objects.ErrCorrupt)
			}
			fallthrough
		case objects.TypeFile:
			h.Typeflag, h.Size = tar.TypeReg, src.Size
		default:
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return stats, err
		}
		stats.Entries++
		if h.Typeflag != tar.TypeReg {
			continue
		}
		var n int64
		for _, id := range src.Chunks {
			sealed, err := st.Get(ctx, k.ChunkKey(id))
			if err != nil {
				return stats, fmt.Errorf("%s: chunk %s: %w", e.Path, id, err)
			}
			plain, err := k.OpenChunk(id, sealed)
			if err != nil {
				return stats, fmt.Errorf("%s: chunk %s: %w", e.Path, id, err)
			}
			if n+int64(len(plain)) > src.Size {
				return stats, fmt.Errorf("%s: more bytes than the %d saved: %w", e.Path, src.Size, objects.ErrCorrupt)
			}
			if _, err := tw.Write(plain); err != nil {
				return stats, err
			}
			n += int64(len(plain))
		}
		if n != src.Size {
			return stats, fmt.Errorf("%s: %d bytes restored, %d saved: %w", e.Path, n, src.Size, objects.ErrCorrupt)
		}
		stats.Bytes += n
	}
	return stats, tw.Close()
}

// TarExtract is the command that extracts WriteTar's stream from stdin
// under the directory that follows it (GNU tar, as root).
var TarExtract = []string{"tar", "--extract", "--file=-", "--numeric-owner", "--same-owner", "--same-permissions",
	"--xattrs", "--xattrs-include=*", "--acls", "--no-overwrite-dir", "-C"}
