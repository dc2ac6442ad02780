// Package snapshot saves a tree into the state store as chunks and a
// manifest, and restores one from it (Contract: State objects (agent ↔
// api); docs/state.md): the pipeline box saves go through, on whichever
// side holds the tree.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// Stats count what a save or a restore did.
type Stats struct {
	// Entries of the tree; Bytes of file content read or written.
	Entries int
	Bytes   int64
	// Chunks referenced; NewChunks of them uploaded (the store lacked
	// them), Uploaded sealed bytes put, manifest included.
	Chunks    int
	NewChunks int
	Uploaded  int64
	// Unchanged files whose chunks were taken from the parent without
	// reading them (same size and mtime).
	Unchanged int
}

// Options of a save.
type Options struct {
	// Skip, when set, leaves out a path (relative to the root) and all
	// under it: the secrets tmpfs, the offload's excluded paths.
	Skip func(rel string) bool
	// Uploads is how many chunks are sealed and put at once (default 4).
	Uploads int
	// Listed, when set, is called once the save has listed the store's
	// chunks, the moment it decided which exist and will not be put: a
	// test holds the save there to run the GC beside it.
	Listed func()
}

// Save writes the trees under root named by paths (relative, e.g.
// home/user and workspace; a missing one is left out) as box's snapshot
// into st under k's user, and answers its full manifest. Only chunks the
// store lacks are put; parent (full, the box's last snapshot, or nil)
// lends the chunks of files whose size and mtime are unchanged,
// and the stored manifest is a delta of it while parentDepth+1 is at most
// objects.MaxDepth. The manifest is put last, so a save cut short leaves
// chunks no manifest names (the GC's) and the previous snapshot whole.
//
// The caller holds the user's state lock shared (state.Shared) from
// before Save lists the chunks until it returns: the GC deletes a chunk
// the save lists as stored only when no save holds it.
//
// The tree is read through an os.Root at root: a symlink is saved as a
// link and never followed, so a tree that its box's root changes cannot
// make the save read outside it.
func Save(ctx context.Context, st store.Store, k *objects.Keys, root string, paths []string, box, snapshot string,
	parent *objects.Manifest, parentDepth int, opts Options) (*objects.Manifest, Stats, error) {
	if err := objects.CheckName("box", box); err != nil {
		return nil, Stats{}, err
	}
	if err := objects.CheckName("snapshot", snapshot); err != nil {
		return nil, Stats{}, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("save %s: %w", box, err)
	}
	defer r.Close()
	have, err := listChunks(ctx, st, k.UID())
	if err != nil {
		return nil, Stats{}, fmt.Errorf("save %s: the store's chunks: %w", box, err)
	}
	if opts.Listed != nil {
		opts.Listed()
	}
	s := &saver{ctx: ctx, st: st, k: k, root: r, have: have, opts: opts, prev: map[string]*objects.Entry{}}
	if parent != nil {
		for i := range parent.Entries {
			s.prev[parent.Entries[i].Path] = &parent.Entries[i]
		}
	}
	s.startUploads()
	walkErr := s.walk(paths)
	upErr := s.stopUploads()
	if err := errors.Join(walkErr, upErr); err != nil {
		return nil, s.stats, fmt.Errorf("save %s/%s: %w", box, snapshot, err)
	}
	full := &objects.Manifest{Version: objects.FormatVersion, Kind: objects.Full, Box: box, Snapshot: snapshot,
		Created: time.Now().UTC().Truncate(time.Millisecond), Entries: s.entries}
	linkHardlinks(full, s.inodes)
	stored := full
	if parent != nil && parentDepth+1 <= objects.MaxDepth {
		stored = objects.Diff(parent, full, parentDepth)
	}
	// The chunks are durable before a manifest names them.
	if err := st.Sync(ctx); err != nil {
		return nil, s.stats, fmt.Errorf("save %s/%s: %w", box, snapshot, err)
	}
	sealed, err := k.SealManifest(stored)
	if err != nil {
		return nil, s.stats, fmt.Errorf("save %s/%s: %w", box, snapshot, err)
	}
	if err := st.Put(ctx, k.ManifestKey(box, snapshot), sealed); err != nil {
		return nil, s.stats, fmt.Errorf("save %s/%s: the manifest: %w", box, snapshot, err)
	}
	if err := st.Sync(ctx); err != nil {
		return nil, s.stats, fmt.Errorf("save %s/%s: the manifest: %w", box, snapshot, err)
	}
	s.stats.Uploaded += int64(len(sealed))
	s.stats.Entries = len(full.Entries)
	return full, s.stats, nil
}

// listChunks is the set of chunk ids the store holds for uid.
func listChunks(ctx context.Context, st store.Store, uid string) (map[string]bool, error) {
	have := map[string]bool{}
	err := st.List(ctx, objects.ChunksPrefix(uid), func(key string) error {
		have[key[strings.LastIndexByte(key, '/')+1:]] = true
		return nil
	})
	return have, err
}

type inode struct{ dev, ino uint64 }

type saver struct {
	ctx     context.Context
	st      store.Store
	k       *objects.Keys
	root    *os.Root
	opts    Options
	prev    map[string]*objects.Entry
	entries []objects.Entry
	inodes  map[string]inode // path → inode, for files with more than one link
	chunker *objects.Chunker
	stats   Stats

	mu      sync.Mutex
	have    map[string]bool // ids stored or on their way
	work    chan []byte
	wg      sync.WaitGroup
	upErr   atomic.Pointer[error]
	newN    atomic.Int64
	newSize atomic.Int64
}

func (s *saver) startUploads() {
	n := s.opts.Uploads
	if n <= 0 {
		n = 4
	}
	s.work = make(chan []byte, n)
	for range n {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for plain := range s.work {
				if s.upErr.Load() != nil {
					continue
				}
				id, sealed := s.k.SealChunk(plain)
				if err := s.st.Put(s.ctx, s.k.ChunkKey(id), sealed); err != nil {
					err = fmt.Errorf("chunk %s: %w", id, err)
					s.upErr.CompareAndSwap(nil, &err)
					continue
				}
				s.newN.Add(1)
				s.newSize.Add(int64(len(sealed)))
			}
		}()
	}
}

func (s *saver) stopUploads() error {
	close(s.work)
	s.wg.Wait()
	s.stats.NewChunks, s.stats.Uploaded = int(s.newN.Load()), s.newSize.Load()
	if e := s.upErr.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *saver) walk(paths []string) error {
	s.inodes = map[string]inode{}
	for _, top := range paths {
		if err := objects.CheckPath(top); err != nil {
			return err
		}
		err := fs.WalkDir(s.root.FS(), top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == top && errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if err := s.ctx.Err(); err != nil {
				return err
			}
			if e := s.upErr.Load(); e != nil {
				return *e
			}
			if s.opts.Skip != nil && s.opts.Skip(p) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			return s.add(p, d)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// add records p: its metadata, and a file's chunks.
func (s *saver) add(p string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	sys, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no stat", p)
	}
	e := objects.Entry{Path: p, Mode: uint32(info.Mode().Perm()), UID: sys.Uid, GID: sys.Gid,
		MtimeNS: sys.Mtim.Nano()}
	if info.Mode()&fs.ModeSetuid != 0 {
		e.Mode |= unix.S_ISUID
	}
	if info.Mode()&fs.ModeSetgid != 0 {
		e.Mode |= unix.S_ISGID
	}
	if info.Mode()&fs.ModeSticky != 0 {
		e.Mode |= unix.S_ISVTX
	}
	switch {
	case info.Mode().IsDir():
		e.Type = objects.TypeDir
	case info.Mode()&fs.ModeSymlink != 0:
		e.Type = objects.TypeSymlink
		if e.Target, err = s.root.Readlink(p); err != nil {
			return err
		}
	case info.Mode().IsRegular():
		e.Type = objects.TypeFile
		if sys.Nlink > 1 {
			s.inodes[p] = inode{sys.Dev, sys.Ino}
		}
	default:
		return nil // sockets, fifos and devices are no part of a home's state
	}
	if e.Type != objects.TypeSymlink {
		if err := s.readFile(&e, info.Size(), sys); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	s.entries = append(s.entries, e)
	return nil
}

// readFile opens e (no symlink followed, and checked to be the inode the
// walk saw), reads its kept xattrs and, for a file, its chunks.
func (s *saver) readFile(e *objects.Entry, size int64, sys *syscall.Stat_t) error {
	f, err := s.root.OpenFile(e.Path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil {
		return err
	}
	if now.Ino != sys.Ino || now.Dev != sys.Dev {
		return errors.New("replaced while it was read")
	}
	if e.Xattrs, err = readXattrs(int(f.Fd())); err != nil {
		return err
	}
	if e.Type != objects.TypeFile {
		return nil
	}
	e.Size = now.Size
	if pe := s.prev[e.Path]; pe != nil && pe.Type == objects.TypeFile && pe.Size == now.Size && pe.MtimeNS == now.Mtim.Nano() && s.allHave(pe.Chunks) {
		// restic's rule: size and mtime unchanged, the content is too
		// (a tool that keeps both while changing the content is rare,
		// and the next full read catches it).
		e.Chunks = pe.Chunks
		s.stats.Chunks += len(e.Chunks)
		s.stats.Unchanged++
		return nil
	}
	// One chunker for the whole save: its buffer is MaxChunk bytes, and
	// clearing one per file was a third of a save's time.
	if s.chunker == nil {
		s.chunker = s.k.NewChunker(f)
	} else {
		s.chunker.Reset(s.k, f)
	}
	c := s.chunker
	for {
		data, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		s.stats.Bytes += int64(len(data))
		id := s.k.ChunkID(data)
		e.Chunks = append(e.Chunks, id)
		s.stats.Chunks++
		s.mu.Lock()
		known := s.have[id]
		s.have[id] = true
		s.mu.Unlock()
		if !known {
			select {
			case s.work <- slices.Clone(data):
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		}
	}
	return nil
}

func (s *saver) allHave(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !s.have[id] {
			return false
		}
	}
	return true
}

// readXattrs are the kept extended attributes of the file open at fd.
func readXattrs(fd int) (map[string][]byte, error) {
	buf := make([]byte, 4096)
	n, err := unix.Flistxattr(fd, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Flistxattr(fd, nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Flistxattr(fd, buf)
		}
	}
	if errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	var out map[string][]byte
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if name == "" || !objects.SavedXattr(name) {
			continue
		}
		sz, err := unix.Fgetxattr(fd, name, nil)
		if err != nil {
			return nil, fmt.Errorf("xattr %s: %w", name, err)
		}
		v := make([]byte, sz)
		if sz, err = unix.Fgetxattr(fd, name, v); err != nil {
			return nil, fmt.Errorf("xattr %s: %w", name, err)
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[name] = v[:sz]
	}
	return out, nil
}

// linkHardlinks sorts m's entries into path order and makes every further
// name of a file with several links a hardlink to the first in that order.
func linkHardlinks(m *objects.Manifest, inodes map[string]inode) {
	slices.SortFunc(m.Entries, func(a, b objects.Entry) int { return strings.Compare(a.Path, b.Path) })
	first := map[inode]string{}
	for i := range m.Entries {
		e := &m.Entries[i]
		in, ok := inodes[e.Path]
		if !ok {
			continue
		}
		if p, ok := first[in]; ok {
			e.Type, e.Link, e.Size, e.Chunks, e.Xattrs = objects.TypeHardlink, p, 0, nil, nil
			continue
		}
		first[in] = e.Path
	}
}
