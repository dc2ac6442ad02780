package objects

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/seal"
)

// FormatVersion is the manifest format's version; docs/fixtures/state-v1.json
// holds one of it, which a test opens.
const FormatVersion = 1

// The kinds of manifest.
const (
	// Full lists every entry of the tree.
	Full = "full"
	// Delta lists what changed since Parent: entries added or changed,
	// and the paths Deleted.
	Delta = "delta"
)

// MaxDepth bounds a chain of deltas: a save past it writes a full
// manifest again.
const MaxDepth = 16

// The types of entry.
const (
	TypeDir     = "dir"
	TypeFile    = "file"
	TypeSymlink = "symlink"
	// TypeHardlink is a further name of a file listed before it (Link).
	TypeHardlink = "hardlink"
)

// Manifest is one snapshot of a box's saved tree (/home/user and
// /workspace), its JSON sealed as one object.
type Manifest struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	// Box and Snapshot name it (the key <uid>/state/manifests/<box>/<snapshot>).
	Box      string `json:"box"`
	Snapshot string `json:"snapshot"`
	// Parent is the snapshot a delta applies to (empty for a full one),
	// and Depth how many deltas lead back to a full manifest, this one
	// counted (a reader loads Depth+1 objects).
	Parent  string    `json:"parent,omitempty"`
	Depth   int       `json:"depth,omitempty"`
	Created time.Time `json:"created"`
	// Entries are in path order, a directory before what it holds.
	Entries []Entry `json:"entries"`
	// Deleted are the paths gone since Parent (a delta only), each one
	// listed.
	Deleted []string `json:"deleted,omitempty"`
}

// Entry is one path of the tree.
type Entry struct {
	// Path is relative to the box's root, "/"-separated, clean, never
	// "..": home/user/.bashrc.
	Path string `json:"path"`
	Type string `json:"type"`
	// Mode is the permission bits with setuid, setgid and sticky
	// (07777); UID and GID the owner in the box.
	Mode uint32 `json:"mode"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	// MtimeNS is the modification time, nanoseconds since the epoch.
	MtimeNS int64 `json:"mtime_ns"`
	// Size (bytes) and Chunks (ids, in order) are a file's content.
	Size   int64    `json:"size,omitempty"`
	Chunks []string `json:"chunks,omitempty"`
	// Target is a symlink's target, as it is (never followed).
	Target string `json:"target,omitempty"`
	// Link is the path of the earlier entry a hardlink shares.
	Link string `json:"link,omitempty"`
	// Xattrs are the extended attributes kept (SavedXattr), by name.
	Xattrs map[string][]byte `json:"xattrs,omitempty"`
}

// SavedXattr says whether an extended attribute is kept: the user's
// (user.*), file capabilities and POSIX ACLs. The overlay's own
// (trusted.overlay.*) and security labels of the host are not the
// tree's.
func SavedXattr(name string) bool {
	return strings.HasPrefix(name, "user.") || name == "security.capability" ||
		name == "system.posix_acl_access" || name == "system.posix_acl_default"
}

// CheckPath says whether p is an entry's path: relative, clean, no ".."
// element, no NUL.
func CheckPath(p string) error {
	if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("path %q is not relative and clean", p)
	}
	return nil
}

// Check says whether m is a well-formed manifest of box and snapshot: its
// version, kind, names, every path (sorted, unique), type and the ids
// and links they hold. Restore and apply trust what passed it.
func (m *Manifest) Check(box, snapshot string) error {
	if m.Version != FormatVersion {
		return fmt.Errorf("manifest version %d, this api reads %d", m.Version, FormatVersion)
	}
	if m.Box != box || m.Snapshot != snapshot {
		return fmt.Errorf("manifest of %s/%s stored as %s/%s", m.Box, m.Snapshot, box, snapshot)
	}
	switch {
	case m.Kind == Full && m.Parent == "" && len(m.Deleted) == 0 && m.Depth == 0:
	case m.Kind == Delta && m.Parent != "" && m.Depth >= 1 && m.Depth <= MaxDepth:
		if err := CheckName("parent", m.Parent); err != nil {
			return err
		}
	default:
		return fmt.Errorf("manifest kind %q with parent %q, depth %d and %d deleted", m.Kind, m.Parent, m.Depth, len(m.Deleted))
	}
	seen := map[string]string{}
	for i, e := range m.Entries {
		if err := CheckPath(e.Path); err != nil {
			return err
		}
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			return fmt.Errorf("entry %q after %q: not in path order", e.Path, m.Entries[i-1].Path)
		}
		if e.Mode&^0o7777 != 0 {
			return fmt.Errorf("%s: mode %o has more than 07777", e.Path, e.Mode)
		}
		switch e.Type {
		case TypeDir, TypeSymlink:
		case TypeFile:
			var n int
			for _, c := range e.Chunks {
				if !chunkIDRule.MatchString(c) {
					return fmt.Errorf("%s: chunk %q is not 64 hex digits", e.Path, c)
				}
				n++
			}
			if e.Size < 0 || (e.Size == 0) != (n == 0) {
				return fmt.Errorf("%s: size %d with %d chunks", e.Path, e.Size, n)
			}
		case TypeHardlink:
			if t, ok := seen[e.Link]; !ok || t != TypeFile {
				return fmt.Errorf("%s: a hard link to %q, which is no file before it", e.Path, e.Link)
			}
		default:
			return fmt.Errorf("%s: type %q", e.Path, e.Type)
		}
		seen[e.Path] = e.Type
	}
	for _, d := range m.Deleted {
		if err := CheckPath(d); err != nil {
			return err
		}
	}
	return nil
}

// SealManifest is the sealed object of m (stored at ManifestKey(m.Box,
// m.Snapshot)): additional data state|<uid>|manifest|<box>/<snapshot>.
func (k *Keys) SealManifest(m *Manifest) ([]byte, error) {
	if err := m.Check(m.Box, m.Snapshot); err != nil {
		return nil, err
	}
	plain, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return seal.SealWith(k.manifest, k.aad("manifest", m.Box+"/"+m.Snapshot), zenc.EncodeAll(plain, nil)), nil
}

// OpenManifest opens the sealed manifest of box's snapshot and checks it
// (Check); a blob that does not open or parse is ErrCorrupt.
func (k *Keys) OpenManifest(box, snapshot string, sealed []byte) (*Manifest, error) {
	z, err := seal.OpenWith(k.manifest, k.aad("manifest", box+"/"+snapshot), sealed)
	if err != nil {
		return nil, fmt.Errorf("manifest %s/%s: %w", box, snapshot, ErrCorrupt)
	}
	plain, err := zdec.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("manifest %s/%s: %v: %w", box, snapshot, err, ErrCorrupt)
	}
	var m Manifest
	if err := json.Unmarshal(plain, &m); err != nil {
		return nil, fmt.Errorf("manifest %s/%s: %v: %w", box, snapshot, err, ErrCorrupt)
	}
	if err := m.Check(box, snapshot); err != nil {
		return nil, fmt.Errorf("manifest %s/%s: %v: %w", box, snapshot, err, ErrCorrupt)
	}
	return &m, nil
}

// Diff is the delta from old to new (both full, of one box): the entries
// of new that old lacks or holds otherwise, and old's paths new lacks.
// depth is old's own Depth (0 when it was stored full).
func Diff(old, new *Manifest, depth int) *Manifest {
	d := &Manifest{Version: FormatVersion, Kind: Delta, Box: new.Box, Snapshot: new.Snapshot, Parent: old.Snapshot, Depth: depth + 1, Created: new.Created}
	was := make(map[string]*Entry, len(old.Entries))
	for i := range old.Entries {
		was[old.Entries[i].Path] = &old.Entries[i]
	}
	is := make(map[string]bool, len(new.Entries))
	for _, e := range new.Entries {
		is[e.Path] = true
		if o, ok := was[e.Path]; !ok || !sameEntry(o, &e) {
			d.Entries = append(d.Entries, e)
		}
	}
	for _, e := range old.Entries {
		if !is[e.Path] {
			d.Deleted = append(d.Deleted, e.Path)
		}
	}
	return d
}

func sameEntry(a, b *Entry) bool {
	if a.Type != b.Type || a.Mode != b.Mode || a.UID != b.UID || a.GID != b.GID || a.MtimeNS != b.MtimeNS ||
		a.Size != b.Size || a.Target != b.Target || a.Link != b.Link || !slices.Equal(a.Chunks, b.Chunks) || len(a.Xattrs) != len(b.Xattrs) {
		return false
	}
	for k, v := range a.Xattrs {
		if w, ok := b.Xattrs[k]; !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}

// Apply is the full manifest that delta d makes of parent (full, the
// snapshot d.Parent names).
func Apply(parent, d *Manifest) (*Manifest, error) {
	if parent.Kind != Full || d.Kind != Delta || d.Parent != parent.Snapshot || d.Box != parent.Box {
		return nil, fmt.Errorf("delta %s/%s (of %s) does not apply to %s %s/%s", d.Box, d.Snapshot, d.Parent, parent.Kind, parent.Box, parent.Snapshot)
	}
	gone := make(map[string]bool, len(d.Deleted))
	for _, p := range d.Deleted {
		gone[p] = true
	}
	changed := make(map[string]bool, len(d.Entries))
	for _, e := range d.Entries {
		changed[e.Path] = true
	}
	out := &Manifest{Version: FormatVersion, Kind: Full, Box: d.Box, Snapshot: d.Snapshot, Created: d.Created}
	for _, e := range parent.Entries {
		if !gone[e.Path] && !changed[e.Path] {
			out.Entries = append(out.Entries, e)
		}
	}
	out.Entries = append(out.Entries, d.Entries...)
	slices.SortFunc(out.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	if err := out.Check(d.Box, d.Snapshot); err != nil {
		return nil, fmt.Errorf("delta %s/%s applied to %s: %w", d.Box, d.Snapshot, parent.Snapshot, err)
	}
	return out, nil
}
