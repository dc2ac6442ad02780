package snapshot

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// extract runs TarExtract on WriteTar's stream into a new directory.
func extract(t *testing.T, tarStream []byte) string {
	t.Helper()
	dst := t.TempDir()
	cmd := exec.Command(TarExtract[0], append(TarExtract[1:], dst)...)
	cmd.Stdin = bytes.NewReader(tarStream)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", cmd.Args, err, out)
	}
	return dst
}

// WriteTar's stream, extracted by GNU tar as root, is the tree Restore
// makes: owners, modes, times, links, xattrs and content.
func TestWriteTarExtractsAsRestoreRestores(t *testing.T) {
	st, k, _, m := savedTree(t)
	var b bytes.Buffer
	if _, err := WriteTar(context.Background(), st, k, m, func(string) bool { return true }, "", &b); err != nil {
		t.Fatal(err)
	}
	got := extract(t, b.Bytes())
	want := t.TempDir()
	if _, err := Restore(context.Background(), st, k, m, want, nil); err != nil {
		t.Fatal(err)
	}
	if g, w := describe(t, got), describe(t, want); g != w {
		t.Fatalf("extracted:\n%s\nrestored:\n%s", g, w)
	}
}

// One path under a prefix: its directories above come as saved, a hard
// link whose file is not written is a file, and nothing else is written.
func TestWriteTarOnePathUnderAPrefix(t *testing.T) {
	st, k, _, m := savedTree(t)
	var b bytes.Buffer
	keep := func(rel string) bool { return rel == "workspace/proj/a-link.go" }
	stats, err := WriteTar(context.Background(), st, k, m, keep, "home/user/back", &b)
	if err != nil {
		t.Fatal(err)
	}
	dst := extract(t, b.Bytes())
	data, err := os.ReadFile(filepath.Join(dst, "home/user/back/workspace/proj/a-link.go"))
	if err != nil || string(data) != "package a\n" {
		t.Fatalf("the hard link restored alone: %q %v", data, err)
	}
	fi, err := os.Stat(filepath.Join(dst, "home/user/back/workspace/proj"))
	if err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the directory above, as saved (sticky): %v %v", fi.Mode(), err)
	}
	if stats.Entries != 3 || stats.Bytes != int64(len("package a\n")) {
		t.Fatalf("stats %+v, want 3 entries (workspace, proj, the file)", stats)
	}
	if _, err := os.Stat(filepath.Join(dst, "home/user/back/workspace/proj/tool")); err == nil {
		t.Fatal("a path not asked for was written")
	}
}

// A missing chunk ends the stream naming the file.
func TestWriteTarNamesAMissingChunk(t *testing.T) {
	st, k, _, m := savedTree(t)
	e := entryOf(t, m, "home/user/big.bin")
	must(t, st.Delete(context.Background(), k.ChunkKey(e.Chunks[1])))
	_, err := WriteTar(context.Background(), st, k, m, func(string) bool { return true }, "", new(bytes.Buffer))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("home/user/big.bin: chunk "+e.Chunks[1])) {
		t.Fatalf("a missing chunk: %v", err)
	}
}
