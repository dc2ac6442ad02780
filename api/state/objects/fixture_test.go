package objects

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/cocoonbox/cocoonbox/api/seal"
)

// fixturePath is the contract's shared fixture (Contract: State objects
// (agent ↔ api)): the agent's tests open it too.
const fixturePath = "../../../docs/fixtures/state-v1.json"

var update = flag.Bool("update", false, "write "+fixturePath+" anew (a format change: say so in docs/state.md)")

type fixture struct {
	Format   string `json:"format"`
	StateKey string `json:"state_key_hex"`
	UID      string `json:"uid"`
	Manifest struct {
		Key      string `json:"key"`
		Box      string `json:"box"`
		Snapshot string `json:"snapshot"`
		Sealed   string `json:"sealed_base64"`
	} `json:"manifest"`
	Chunk struct {
		Key    string `json:"key"`
		ID     string `json:"id"`
		Plain  string `json:"plain"`
		Sealed string `json:"sealed_base64"`
	} `json:"chunk"`
}

// The fixture's fixed test key: bytes 0x00 to 0x1f.
func fixtureKey() []byte {
	k := make([]byte, 32)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

const fixtureChunk = "hello from a cocoonbox save, state format v1\n"

// fixtureManifest is what the fixture's manifest holds; its one chunk id
// is filled in from the chunk.
func fixtureManifest(chunkID string) *Manifest {
	return &Manifest{Version: FormatVersion, Kind: Full, Box: "fixture-box", Snapshot: "s-20261207-0001",
		Created: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC),
		Entries: []Entry{
			{Path: "home/user", Type: TypeDir, Mode: 0o750, UID: 1000, GID: 1000, MtimeNS: 1796644800000000000},
			{Path: "home/user/hello.txt", Type: TypeFile, Mode: 0o644, UID: 1000, GID: 1000, MtimeNS: 1796644800123456789,
				Size: int64(len(fixtureChunk)), Chunks: []string{chunkID}, Xattrs: map[string][]byte{"user.origin": []byte("fixture")}},
			{Path: "home/user/hello2.txt", Type: TypeHardlink, Mode: 0o644, UID: 1000, GID: 1000, MtimeNS: 1796644800123456789, Link: "home/user/hello.txt"},
			{Path: "home/user/latest", Type: TypeSymlink, Mode: 0o777, UID: 1000, GID: 1000, MtimeNS: 1796644800000000000, Target: "hello.txt"},
			{Path: "workspace", Type: TypeDir, Mode: 0o755, UID: 1000, GID: 1000, MtimeNS: 1796644800000000000},
		}}
}

// Contract: State objects (agent ↔ api): docs/fixtures/state-v1.json
// opens, and holds what the format says, read here twice: through this
// package and through the documented recipe alone (seal.Open with the
// label and additional data docs/state.md gives, zstd, JSON), so a change
// of the format or of the document fails it.
func TestStateFixtureV1Opens(t *testing.T) {
	if *update {
		writeFixture(t)
	}
	data, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	key, _ := hex.DecodeString(f.StateKey)
	if !bytes.Equal(key, fixtureKey()) || f.Format != "cocoonbox state objects v1" {
		t.Fatalf("fixture key or format changed: %s, %q", f.StateKey, f.Format)
	}
	k, err := NewKeys(f.UID, key)
	if err != nil {
		t.Fatal(err)
	}
	sealedChunk, _ := base64.StdEncoding.DecodeString(f.Chunk.Sealed)
	plain, err := k.OpenChunk(f.Chunk.ID, sealedChunk)
	if err != nil || string(plain) != fixtureChunk || f.Chunk.Plain != fixtureChunk {
		t.Fatalf("the fixture's chunk: %q, %v", plain, err)
	}
	if f.Chunk.Key != k.ChunkKey(f.Chunk.ID) || f.Chunk.ID != k.ChunkID(plain) {
		t.Fatalf("the chunk's key %s or id %s is not what this package names it", f.Chunk.Key, f.Chunk.ID)
	}
	sealedManifest, _ := base64.StdEncoding.DecodeString(f.Manifest.Sealed)
	m, err := k.OpenManifest(f.Manifest.Box, f.Manifest.Snapshot, sealedManifest)
	if err != nil {
		t.Fatal(err)
	}
	if want := fixtureManifest(f.Chunk.ID); !reflect.DeepEqual(m, want) {
		t.Fatalf("the fixture's manifest:\n%+v\nwant\n%+v", m, want)
	}
	if f.Manifest.Key != k.ManifestKey(m.Box, m.Snapshot) {
		t.Fatalf("the manifest's key %s is not %s", f.Manifest.Key, k.ManifestKey(m.Box, m.Snapshot))
	}

	// The documented recipe, without this package's code.
	body, err := seal.Open(key, "cocoonbox state chunk", "state|"+f.UID+"|chunk|"+f.Chunk.ID, sealedChunk)
	if err != nil || len(body) == 0 {
		t.Fatalf("the chunk by docs/state.md's recipe: %v", err)
	}
	zd, _ := zstd.NewReader(nil)
	defer zd.Close()
	switch body[0] {
	case 0:
		plain = body[1:]
	case 1:
		plain, err = zd.DecodeAll(body[1:], nil)
	}
	if err != nil || string(plain) != fixtureChunk {
		t.Fatalf("the chunk's body by the recipe: %q, %v", plain, err)
	}
	z, err := seal.Open(key, "cocoonbox state manifest", "state|"+f.UID+"|manifest|"+f.Manifest.Box+"/"+f.Manifest.Snapshot, sealedManifest)
	if err != nil {
		t.Fatalf("the manifest by docs/state.md's recipe: %v", err)
	}
	js, err := zd.DecodeAll(z, nil)
	var raw map[string]any
	if err != nil || json.Unmarshal(js, &raw) != nil || raw["version"] != float64(1) || raw["kind"] != "full" {
		t.Fatalf("the manifest's JSON by the recipe: %s, %v", js, err)
	}
}

func writeFixture(t *testing.T) {
	k, err := NewKeys("00000000-0000-4000-8000-000000000001", fixtureKey())
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	f.Format, f.StateKey, f.UID = "cocoonbox state objects v1", hex.EncodeToString(fixtureKey()), k.UID()
	id, sealedChunk := k.SealChunk([]byte(fixtureChunk))
	f.Chunk.Key, f.Chunk.ID, f.Chunk.Plain, f.Chunk.Sealed = k.ChunkKey(id), id, fixtureChunk, base64.StdEncoding.EncodeToString(sealedChunk)
	m := fixtureManifest(id)
	sealedManifest, err := k.SealManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	f.Manifest.Key, f.Manifest.Box, f.Manifest.Snapshot, f.Manifest.Sealed = k.ManifestKey(m.Box, m.Snapshot), m.Box, m.Snapshot, base64.StdEncoding.EncodeToString(sealedManifest)
	data, _ := json.MarshalIndent(f, "", "  ")
	if err := os.WriteFile(fixturePath, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
