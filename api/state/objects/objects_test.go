package objects

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testKeys(t *testing.T, uid string, b byte) *Keys {
	t.Helper()
	k, err := NewKeys(uid, bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Each object is bound to its user, kind and name: moved to another
// chunk's id, another user or opened as another kind, it does not open;
// a flipped byte does not open either. The control opens the untouched
// object, so the refusals are the binding's.
func TestSealedObjectsAreBoundToUserKindAndName(t *testing.T) {
	alice, bob := testKeys(t, "alice", 1), testKeys(t, "bob", 1) // one key: only the uid differs
	id, sealed := alice.SealChunk([]byte("some content"))
	if got, err := alice.OpenChunk(id, sealed); err != nil || string(got) != "some content" {
		t.Fatalf("control: %q, %v", got, err)
	}
	otherID, _ := alice.SealChunk([]byte("other content"))
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)/2] ^= 1
	for what, err := range map[string]error{
		"another chunk's id": second(alice.OpenChunk(otherID, sealed)),
		"another user":       second(bob.OpenChunk(id, sealed)),
		"a flipped byte":     second(alice.OpenChunk(id, flipped)),
		"a cut object":       second(alice.OpenChunk(id, sealed[:10])),
		"a bad id":           second(alice.OpenChunk("../x", sealed)),
		"as a manifest":      second(alice.OpenManifest("b", id, sealed)),
	} {
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", what, err)
		}
	}
	m := &Manifest{Version: FormatVersion, Kind: Full, Box: "b", Snapshot: "s1"}
	sm, err := alice.SealManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.OpenManifest("b", "s1", sm); err != nil {
		t.Fatalf("control: %v", err)
	}
	for what, err := range map[string]error{
		"another snapshot": second(alice.OpenManifest("b", "s2", sm)),
		"another box":      second(alice.OpenManifest("c", "s1", sm)),
		"another user":     second(bob.OpenManifest("b", "s1", sm)),
	} {
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("manifest as %s: %v, want ErrCorrupt", what, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Dedup per user: one content has one id for a user, another for another
// user (the ids are keyed), so nothing is shared or confirmable across
// users.
func TestChunkIDsAreKeyedPerUser(t *testing.T) {
	a, b := testKeys(t, "alice", 1), testKeys(t, "bob", 2)
	again := testKeys(t, "alice", 1)
	if a.ChunkID([]byte("x")) != again.ChunkID([]byte("x")) {
		t.Fatal("one content, two ids")
	}
	if a.ChunkID([]byte("x")) == b.ChunkID([]byte("x")) {
		t.Fatal("two users' ids of one content are equal")
	}
}

func chunks(t *testing.T, k *Keys, data []byte) []string {
	c := k.NewChunker(bytes.NewReader(data))
	var ids []string
	for {
		ch, err := c.Next()
		if err == io.EOF {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, k.ChunkID(ch))
	}
}

// Content-defined: bytes inserted near the start of a large file change
// the chunks around them only.
func TestChunkerKeepsChunksAroundAnInsertion(t *testing.T) {
	k := testKeys(t, "alice", 3)
	data := make([]byte, 24<<20)
	r := rand.NewChaCha8([32]byte{7})
	r.Read(data)
	before := chunks(t, k, data)
	changed := append(append(bytes.Clone(data[:1000]), []byte("inserted")...), data[1000:]...)
	after := chunks(t, k, changed)
	shared := map[string]bool{}
	for _, id := range before {
		shared[id] = true
	}
	n := 0
	for _, id := range after {
		if shared[id] {
			n++
		}
	}
	if len(before) < 8 || n < len(after)-2 {
		t.Fatalf("%d chunks before, %d after, %d shared: an insertion moved more than its own chunk", len(before), len(after), n)
	}
}

func TestCompressibleChunkIsStoredSmaller(t *testing.T) {
	k := testKeys(t, "alice", 4)
	plain := []byte(strings.Repeat("a line of a text file\n", 20000))
	id, sealed := k.SealChunk(plain)
	if len(sealed) > len(plain)/4 {
		t.Fatalf("%d bytes sealed of %d compressible", len(sealed), len(plain))
	}
	if got, err := k.OpenChunk(id, sealed); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("round trip: %d bytes, %v", len(got), err)
	}
}

func entry(p, typ string) Entry { return Entry{Path: p, Type: typ, Mode: 0o644, UID: 1000, GID: 1000} }

// A delta of two full manifests, applied to the first, is the second.
func TestDeltaAppliedToItsParentIsTheFullManifest(t *testing.T) {
	id := strings.Repeat("ab", 32)
	file := func(p string, mtime int64) Entry {
		e := entry(p, TypeFile)
		e.Size, e.Chunks, e.MtimeNS = 1, []string{id}, mtime
		return e
	}
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	old := &Manifest{Version: 1, Kind: Full, Box: "b", Snapshot: "s1", Created: at, Entries: []Entry{
		entry("home", TypeDir), file("home/a", 1), file("home/b", 1), entry("home/gone", TypeDir), file("home/gone/x", 1)}}
	nu := &Manifest{Version: 1, Kind: Full, Box: "b", Snapshot: "s2", Created: at.Add(time.Hour), Entries: []Entry{
		entry("home", TypeDir), file("home/a", 1), file("home/b", 2), file("home/c", 1)}}
	d := Diff(old, nu, 0)
	if len(d.Entries) != 2 || !reflect.DeepEqual(d.Deleted, []string{"home/gone", "home/gone/x"}) {
		t.Fatalf("delta: %d entries, deleted %q; want home/b and home/c, and home/gone with what it held", len(d.Entries), d.Deleted)
	}
	if err := d.Check("b", "s2"); err != nil {
		t.Fatal(err)
	}
	got, err := Apply(old, d)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, nu) {
		t.Fatalf("applied:\n%+v\nwant\n%+v", got, nu)
	}
	if _, err := Apply(nu, d); err == nil {
		t.Fatal("a delta applied to a snapshot other than its parent")
	}
}

// Bad input: a manifest that breaks a rule is refused naming the rule.
func TestManifestCheckNamesTheRule(t *testing.T) {
	ok := func() *Manifest {
		return &Manifest{Version: 1, Kind: Full, Box: "b", Snapshot: "s", Entries: []Entry{entry("home", TypeDir)}}
	}
	for want, change := range map[string]func(*Manifest){
		"version 2":            func(m *Manifest) { m.Version = 2 },
		"stored as":            func(m *Manifest) { m.Box = "c" },
		`path "../x"`:          func(m *Manifest) { m.Entries[0].Path = "../x" },
		`path "/etc"`:          func(m *Manifest) { m.Entries[0].Path = "/etc" },
		`path "a//b"`:          func(m *Manifest) { m.Entries[0].Path = "a//b" },
		"not in path order":    func(m *Manifest) { m.Entries = append(m.Entries, entry("a", TypeDir)) },
		"more than 07777":      func(m *Manifest) { m.Entries[0].Mode = 0o170000 },
		`type "fifo"`:          func(m *Manifest) { m.Entries[0].Type = "fifo" },
		"size 5 with 0 chunks": func(m *Manifest) { m.Entries[0].Type, m.Entries[0].Size = TypeFile, 5 },
		"which is no file":     func(m *Manifest) { m.Entries[0].Type, m.Entries[0].Link = TypeHardlink, "etc/passwd" },
		"kind":                 func(m *Manifest) { m.Kind = Delta },
	} {
		m := ok()
		change(m)
		if err := m.Check("b", "s"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if err := ok().Check("b", "s"); err != nil {
		t.Fatalf("control: %v", err)
	}
}
