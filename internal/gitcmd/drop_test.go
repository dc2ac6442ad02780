package gitcmd

import (
	"os"
	"path/filepath"
	"testing"
)

// Issue 39, Deliver 3: an ended offload's S and S′ go with the loose
// objects only they held (an untracked file's blob), while an object
// something else still names stays: a file the user committed since with
// the same bytes, and the index's.
func TestDropOffloadRemovesWhatOnlyItsRefsHeld(t *testing.T) {
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644)
	git(t, dir, "add", "a")
	git(t, dir, "commit", "-q", "-m", "one")
	os.WriteFile(filepath.Join(dir, "big"), []byte("only S has these bytes\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "kept"), []byte("committed since\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "staged"), []byte("staged since\n"), 0o644)
	s, err := Snapshot(dir, "S", false)
	if err != nil {
		t.Fatal(err)
	}
	git(t, dir, "update-ref", "refs/cocoonbox/base/x", s)
	git(t, dir, "update-ref", "refs/cocoonbox/back/x", s)
	git(t, dir, "add", "kept")
	git(t, dir, "commit", "-q", "-m", "kept")
	git(t, dir, "add", "staged")
	big, kept, staged := git(t, dir, "rev-parse", s+":big"), git(t, dir, "rev-parse", s+":kept"), git(t, dir, "rev-parse", s+":staged")
	loose := func(oid string) bool {
		_, err := os.Stat(filepath.Join(dir, ".git/objects", oid[:2], oid[2:]))
		return err == nil
	}
	if !loose(big) {
		t.Fatal("S's blob of the untracked file is not a loose object")
	}
	if err := DropOffload(dir, "x"); err != nil {
		t.Fatal(err)
	}
	if out, _ := Run(dir, nil, nil, "for-each-ref", "refs/cocoonbox/"); out != "" {
		t.Errorf("refs left: %s", out)
	}
	if loose(big) {
		t.Error("the untracked file's blob, which only S held, is still there")
	}
	if !loose(kept) || !loose(staged) {
		t.Error("a blob a commit or the index still names was removed")
	}
	if _, err := Run(dir, nil, nil, "fsck", "--no-dangling", "--connectivity-only"); err != nil {
		t.Errorf("the repository is broken after the drop: %v", err)
	}
	if err := DropOffload(dir, "x"); err != nil {
		t.Errorf("a second drop: %v", err)
	}
}
