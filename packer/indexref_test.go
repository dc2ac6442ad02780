package packer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest/repocorpus"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// A partially staged file (issue 22): the bundle carries the staged blob,
// which no commit names, so the box's index (rsync carries it) names
// nothing the copy lacks; IndexRef is gone again after the bundle.
func TestTheBundleCarriesTheStagedBlob(t *testing.T) {
	top := repocorpus.ByName(t, "partially-staged").Make(t)
	staged, err := gitcmd.Run(top, nil, nil, "rev-parse", ":src/main.go")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "offload.bundle")
	head, _ := gitcmd.Run(top, nil, nil, "rev-parse", "HEAD")
	if ok, err := makeBundle(top, file, map[string]any{"refs/heads/main": head}, ""); !ok || err != nil {
		t.Fatalf("makeBundle: %v %v", ok, err)
	}
	// The box: the history up to HEAD (the bundle's prerequisite), then
	// the bundle's pack, as send takes it.
	box := t.TempDir()
	gitcmd.Run(box, nil, nil, "init", "-q")
	if _, err := gitcmd.Run(box, nil, nil, "fetch", "-q", top, head); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pack := string(data[strings.Index(string(data), "\n\n")+2:])
	if _, err := gitcmd.Run(box, nil, strings.NewReader(pack), "index-pack", "--stdin", "--fix-thin"); err != nil {
		t.Fatal(err)
	}
	if typ, err := gitcmd.Run(box, nil, nil, "cat-file", "-t", staged); err != nil || typ != "blob" {
		t.Errorf("the staged blob %s is not in the bundle: %q %v", staged, typ, err)
	}
	if out, _ := gitcmd.Run(top, nil, nil, "for-each-ref", IndexRef); out != "" {
		t.Errorf("%s is left in the user's repository: %s", IndexRef, out)
	}
}

// Issue 39, Deliver 3: an untracked file travels once, by rsync: the
// bundle carries S's commit and trees but not the blobs only S reaches
// (the box's check writes them from the copy), and still the staged blob
// the index names.
func TestTheBundleLeavesOutWhatRsyncSends(t *testing.T) {
	top := repocorpus.ByName(t, "partially-staged").Make(t)
	if err := os.WriteFile(filepath.Join(top, "untracked.bin"), []byte("bytes only S reaches\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := gitcmd.Snapshot(top, "S", false)
	if err != nil {
		t.Fatal(err)
	}
	ref := "refs/cocoonbox/base/off-once"
	gitcmd.Run(top, nil, nil, "update-ref", ref, s)
	staged, _ := gitcmd.Run(top, nil, nil, "rev-parse", ":src/main.go")
	untracked, _ := gitcmd.Run(top, nil, nil, "rev-parse", s+":untracked.bin")
	file := filepath.Join(t.TempDir(), "offload.bundle")
	if ok, err := makeBundle(top, file, nil, ref); !ok || err != nil {
		t.Fatalf("makeBundle: %v %v", ok, err)
	}
	box := t.TempDir()
	gitcmd.Run(box, nil, nil, "init", "-q")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), s+" "+ref+"\n") {
		t.Errorf("the bundle does not name S at %s", ref)
	}
	pack := string(data[strings.Index(string(data), "\n\n")+2:])
	if _, err := gitcmd.Run(box, nil, strings.NewReader(pack), "index-pack", "--stdin", "--fix-thin"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{s, s + "^{tree}", staged} {
		if _, err := gitcmd.Run(box, nil, nil, "cat-file", "-e", o); err != nil {
			t.Errorf("%s is not in the bundle: %v", o, err)
		}
	}
	if _, err := gitcmd.Run(box, nil, nil, "cat-file", "-e", untracked); err == nil {
		t.Error("the untracked file's blob travels in the bundle as well as by rsync")
	}
}
