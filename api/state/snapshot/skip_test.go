package snapshot

import (
	"os"
	"path/filepath"
	"testing"
)

// The offload's excludes leave out what they list under /workspace/ and
// nothing else (Contract: Offload, State excludes).
func TestExcludesSkipListsOnlyWorkspacePaths(t *testing.T) {
	skip := ExcludesSkip("/workspace/app/node_modules/\n/workspace/app/build\n/home/user/.cache/\n/workspace/../etc\nworkspace/rel\n\n")
	for rel, want := range map[string]bool{
		"workspace/app/node_modules": true,
		"workspace/app/build":        true,
		"workspace/app":              false,
		"workspace/app/src":          false,
		"home/user/.cache":           false,
		"etc":                        false,
		"workspace/rel":              false,
	} {
		if got := skip(rel); got != want {
			t.Errorf("skip(%q) = %v, want %v", rel, got, want)
		}
	}
}

// A box's save reads the excludes file inside its root; a link there to
// a file outside the root is refused, not followed.
func TestBoxSkipReadsTheExcludesInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	skip, err := BoxSkip(root)
	if err != nil || skip("workspace/x") {
		t.Fatalf("no excludes file: %v %v", err, skip("workspace/x"))
	}
	p := filepath.Join(root, ExcludesPath)
	must(t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(t, os.WriteFile(p, []byte("/workspace/app/node_modules\n"), 0o600))
	skip, err = BoxSkip(root)
	if err != nil || !skip("workspace/app/node_modules") || skip("workspace/app") {
		t.Fatalf("excludes: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "excludes")
	must(t, os.WriteFile(outside, []byte("/workspace/x\n"), 0o600))
	must(t, os.Remove(p))
	must(t, os.Symlink(outside, p))
	if _, err := BoxSkip(root); err == nil {
		t.Fatal("an excludes file linked out of the root was read")
	}
}
