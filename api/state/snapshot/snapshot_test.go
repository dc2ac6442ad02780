package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

func setup(t *testing.T) (store.Store, *objects.Keys) {
	st, err := store.OpenDir(filepath.Join(t.TempDir(), "state"), "http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := objects.NewKeys("00000000-0000-4000-8000-00000000000a", bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return st, k
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func random(seed byte, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// tree makes the shapes a home holds: nested directories, an empty file,
// a large file, a symlink (dangling and out of the tree), a hard link,
// setuid and sticky modes, another owner, a user xattr, a file name with
// a space and a newline, and a secret directory Skip leaves out.
func tree(t *testing.T) string {
	root := t.TempDir()
	home := filepath.Join(root, "home/user")
	must(t, os.MkdirAll(filepath.Join(home, "src/deep/er"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "workspace/proj"), 0o755))
	must(t, os.MkdirAll(filepath.Join(home, ".secrets"), 0o700))
	must(t, os.WriteFile(filepath.Join(home, ".secrets/token"), []byte("never saved"), 0o600))
	must(t, os.WriteFile(filepath.Join(home, "empty"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(home, "big.bin"), random(1, 20<<20), 0o644))
	must(t, os.WriteFile(filepath.Join(home, "src/deep/er/a.go"), []byte("package a\n"), 0o640))
	must(t, os.WriteFile(filepath.Join(home, "name with space\nand newline"), []byte("odd"), 0o644))
	must(t, os.Symlink("/etc/passwd", filepath.Join(home, "escape")))
	must(t, os.Symlink("nowhere", filepath.Join(home, "dangling")))
	must(t, os.Link(filepath.Join(home, "src/deep/er/a.go"), filepath.Join(root, "workspace/proj/a-link.go")))
	must(t, os.WriteFile(filepath.Join(root, "workspace/proj/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chmod(filepath.Join(root, "workspace/proj/tool"), 0o755|os.ModeSetuid))
	must(t, os.Chmod(filepath.Join(root, "workspace/proj"), 0o777|os.ModeSticky))
	must(t, os.Lchown(filepath.Join(home, "src"), 1000, 1001))
	must(t, os.Chown(filepath.Join(home, "empty"), 1000, 1000))
	must(t, unix.Setxattr(filepath.Join(home, "empty"), "user.note", []byte("kept"), 0))
	old := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	must(t, os.Chtimes(filepath.Join(home, "src/deep/er/a.go"), old, old))
	return root
}

func skipSecrets(rel string) bool { return rel == "home/user/.secrets" }

// describe lists a tree as lines: path, type, mode, owner, mtime (not of
// symlinks), size, content hash, link target, xattrs, inode group.
func describe(t *testing.T, root string) string {
	var b strings.Builder
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch rel {
		case ".", "home":
			return nil // not saved: the box's own
		case "home/user/.secrets":
			return fs.SkipDir // never saved
		}
		info, _ := d.Info()
		sys := info.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%q %s uid=%d gid=%d", rel, info.Mode(), sys.Uid, sys.Gid)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", target)
		case info.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " mtime=%d size=%d sum=%x", sys.Mtim.Nano(), len(data), objectsSum(data))
			if first, ok := inodes[sys.Ino]; ok {
				fmt.Fprintf(&b, " same-inode-as=%q", first)
			} else {
				inodes[sys.Ino] = rel
			}
			if v, err := unix.Getxattr(p, "user.note", make([]byte, 64)); err == nil {
				fmt.Fprintf(&b, " xattr=%d", v)
			}
		case info.IsDir():
			fmt.Fprintf(&b, " mtime=%d", sys.Mtim.Nano())
		}
		b.WriteByte('\n')
		return nil
	})
	must(t, err)
	return b.String()
}

func objectsSum(b []byte) uint64 {
	var h uint64 = 14695981039346656037
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

var paths = []string{"home/user", "workspace"}

// A tree saved and restored elsewhere is the same tree, the secrets
// directory left out; a second save after a small change uploads only
// the changed file's chunks and a delta, which loads as the full tree.
func TestSaveRestoreRoundTripAndDelta(t *testing.T) {
	ctx := context.Background()
	st, k := setup(t)
	src := tree(t)
	m1, s1, err := Save(ctx, st, k, src, paths, "box1", "s1", nil, 0, Options{Skip: skipSecrets})
	must(t, err)
	if s1.NewChunks < 10 || s1.Uploaded < 10<<20 {
		t.Fatalf("first save: %+v", s1)
	}
	restoresAs(t, st, k, m1, src)

	must(t, os.WriteFile(filepath.Join(src, "home/user/new.txt"), []byte("new"), 0o644))
	must(t, os.Remove(filepath.Join(src, "home/user/dangling")))
	_, s2, err := Save(ctx, st, k, src, paths, "box1", "s2", m1, 0, Options{Skip: skipSecrets})
	must(t, err)
	if s2.NewChunks != 1 || s2.Uploaded > 64<<10 || s2.Unchanged < 5 {
		t.Fatalf("second save after one new small file: %+v; want one new chunk and a small delta", s2)
	}
	m2, depth, err := Load(ctx, st, k, "box1", "s2")
	must(t, err)
	if depth != 1 {
		t.Fatalf("the second snapshot's depth: %d, want 1 (a delta of a full one)", depth)
	}
	restoresAs(t, st, k, m2, src)
}

// savedTree is tree's first snapshot in a new store.
func savedTree(t *testing.T) (store.Store, *objects.Keys, string, *objects.Manifest) {
	t.Helper()
	st, k := setup(t)
	src := tree(t)
	m, _, err := Save(context.Background(), st, k, src, paths, "box1", "s1", nil, 0, Options{Skip: skipSecrets})
	must(t, err)
	return st, k, src, m
}

// entryOf is m's entry of path p.
func entryOf(t *testing.T, m *objects.Manifest, p string) objects.Entry {
	t.Helper()
	for _, e := range m.Entries {
		if e.Path == p {
			return e
		}
	}
	t.Fatalf("no %s in snapshot %s", p, m.Snapshot)
	return objects.Entry{}
}

// restoresAs restores m into a new directory and holds it equal to src.
func restoresAs(t *testing.T, st store.Store, k *objects.Keys, m *objects.Manifest, src string) {
	t.Helper()
	dst := t.TempDir()
	if _, err := Restore(context.Background(), st, k, m, dst, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(t, dst), describe(t, src); got != want {
		t.Fatalf("snapshot %s restored:\n%s\nthe tree saved:\n%s", m.Snapshot, got, want)
	}
}

// Fault: a chunk missing from the store is found at restore and named
// with its file; every other file is restored.
func TestRestoreNamesAMissingChunkAndRestoresTheRest(t *testing.T) {
	ctx := context.Background()
	st, k, _, m := savedTree(t)
	victim := entryOf(t, m, "home/user/src/deep/er/a.go")
	must(t, st.Delete(ctx, k.ChunkKey(victim.Chunks[0])))
	dst := t.TempDir()
	_, err := Restore(ctx, st, k, m, dst, nil)
	if err == nil || !strings.Contains(err.Error(), victim.Path) || !strings.Contains(err.Error(), victim.Chunks[0]) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("restore with a chunk gone: %v; want an error naming %s and its chunk", err, victim.Path)
	}
	if data, err := os.ReadFile(filepath.Join(dst, "home/user/big.bin")); err != nil || !bytes.Equal(data, random(1, 20<<20)) {
		t.Fatalf("the other files were not restored: %v", err)
	}
}

// A corrupted chunk (one byte flipped in the store) is found at restore
// and named with its file, as a missing one is.
func TestRestoreNamesACorruptChunk(t *testing.T) {
	ctx := context.Background()
	st, k, _, m := savedTree(t)
	victim := entryOf(t, m, "home/user/big.bin")
	key := k.ChunkKey(victim.Chunks[1])
	sealed, err := st.Get(ctx, key)
	must(t, err)
	sealed[len(sealed)/2] ^= 0x40
	must(t, st.Put(ctx, key, sealed))
	_, err = Restore(ctx, st, k, m, t.TempDir(), nil)
	if !errors.Is(err, objects.ErrCorrupt) || !strings.Contains(err.Error(), victim.Path) || !strings.Contains(err.Error(), victim.Chunks[1]) {
		t.Fatalf("restore with a corrupt chunk: %v; want ErrCorrupt naming %s and the chunk", err, victim.Path)
	}
}

// One path restored alone (the ground of RestorePaths): the file with its
// content and metadata, its directories made, nothing else.
func TestRestoreOnePath(t *testing.T) {
	st, k, src, m := savedTree(t)
	dst := t.TempDir()
	want := "home/user/src/deep/er/a.go"
	_, err := Restore(context.Background(), st, k, m, dst, func(rel string) bool { return rel == want })
	must(t, err)
	var got []string
	must(t, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, rel)
		}
		return err
	}))
	if len(got) != 1 || got[0] != want {
		t.Fatalf("restored files: %q, want %s alone", got, want)
	}
	a, _ := os.Stat(filepath.Join(src, want))
	b, _ := os.Stat(filepath.Join(dst, want))
	if a.ModTime() != b.ModTime() || a.Mode() != b.Mode() || a.Size() != b.Size() {
		t.Fatalf("%s restored as %v %v %d, saved %v %v %d", want, b.Mode(), b.ModTime(), b.Size(), a.Mode(), a.ModTime(), a.Size())
	}
}

// Root in the box is the attacker: a manifest whose symlink points out of
// the destination, followed by an entry under that symlink, writes
// nothing outside the destination.
func TestRestoreStaysInsideItsDestination(t *testing.T) {
	ctx := context.Background()
	st, k := setup(t)
	outside := t.TempDir()
	id, sealed := k.SealChunk([]byte("pwned"))
	must(t, st.Put(ctx, k.ChunkKey(id), sealed))
	m := &objects.Manifest{Version: 1, Kind: objects.Full, Box: "b", Snapshot: "s", Entries: []objects.Entry{
		{Path: "home", Type: objects.TypeSymlink, Mode: 0o777, Target: outside},
		{Path: "home/x", Type: objects.TypeFile, Mode: 0o644, Size: 5, Chunks: []string{id}},
	}}
	must(t, m.Check("b", "s"))
	_, err := Restore(ctx, st, k, m, t.TempDir(), nil)
	if _, serr := os.Stat(filepath.Join(outside, "x")); serr == nil {
		t.Fatal("restore wrote through a symlink out of its destination")
	}
	if err == nil {
		t.Fatal("restore of an entry under an escaping symlink: no error")
	}
}
