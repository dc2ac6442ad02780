//go:build booted

package offload

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// bigUntracked is the untracked file each offload of the growth test
// carries: 100 MiB, new bytes every round (a regenerated data set).
const bigUntracked = 100 << 20

// historyBounded is issue 39's "content travels twice and is kept
// forever" (Deliver 3): ten offloads and backs of a repository with a
// 100 MiB untracked file left .git 100 MiB bigger per offload on both
// sides (rsync and the bundle both carried the file, and the kept
// refs/cocoonbox/base/* and back/* pinned every version). After ten, .git
// here and in the box's copy is within 10% of the file of after one.
func historyBounded(t *testing.T, r *rig) {
	p := r.packer(t, t.TempDir())
	top, _ := repo(t, p, "growth", "standin: commit")
	var name string
	var host1, box1 int64
	for round := 1; round <= 10; round++ {
		data := make([]byte, bigUntracked)
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(top, "data.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		res := offloadRepo(t, p, top)
		name = res.Name
		if _, err := p.Back(context.Background(), top, false); err != nil {
			t.Fatalf("round %d: back: %v\nprogress:\n%s", round, err, r.progress)
		}
		host, box := duBytes(t, filepath.Join(top, ".git")), boxDuBytes(t, r, "/workspace/"+name+"/.git")
		t.Logf("round %d: .git here %d bytes, in the box %d bytes", round, host, box)
		if round == 1 {
			host1, box1 = host, box
		}
	}
	// Once back is done neither side keeps a version of the file (S and
	// S′ went, with what only they held), so .git after one is a few KiB
	// and the stand-in's ten commits, the pre-back refs and the box's packs
	// of them are most of what ten add: the bound is 10% of one copy of
	// the file, where before each offload added a whole copy.
	host, box := duBytes(t, filepath.Join(top, ".git")), boxDuBytes(t, r, "/workspace/"+name+"/.git")
	slack := int64(bigUntracked / 10)
	for _, c := range []struct {
		side      string
		one, last int64
	}{{".git here", host1, host}, {"the box copy's .git", box1, box}} {
		if c.one > slack {
			t.Errorf("%s is %d bytes after one offload and its back: it still holds the untracked file", c.side, c.one)
		}
		if c.last > c.one+slack {
			t.Errorf("%s is %d bytes after ten offloads, %d after one: more than 10%% of the file bigger", c.side, c.last, c.one)
		}
	}
	for _, ref := range strings.Fields(git(t, top, "for-each-ref", "--format=%(refname)", "refs/cocoonbox/base/", "refs/cocoonbox/back/")) {
		t.Errorf("%s is still here after its back", ref)
	}
	if !strings.Contains(git(t, top, "status", "--porcelain"), "?? data.bin") {
		t.Error("data.bin is no longer untracked here")
	}
}

// duBytes is the apparent size of the files under dir.
func duBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// boxDuBytes is duBytes of dir in the box.
func boxDuBytes(t *testing.T, r *rig, dir string) int64 {
	t.Helper()
	out := strings.TrimSpace(r.b.MustSh(t, "find "+dir+" -type f -printf '%s\\n' | awk '{n+=$1} END {print n+0}'"))
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("the size of %s in the box: %q", dir, out)
	}
	return n
}
