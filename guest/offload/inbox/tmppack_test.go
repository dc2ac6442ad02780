package inbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 39, Deliver 5: an offload killed during send left its git
// index-pack's temporary pack in the copy's .git/objects/pack (216 MB
// seen), and nothing removed it. Send holds the repo's lock while it
// indexes, so a temporary pack that begin finds under that lock is a
// killed send's: begin removes it.
func TestBeginRemovesAnInterruptedSendsTemporaryPacks(t *testing.T) {
	e := newEnv(t)
	host := e.hostRepo("tp")
	pack := packOf(t, host)
	dir := filepath.Join(e.paths.Workspace, "tp")
	must(t, os.MkdirAll(dir, 0o755))
	git(t, dir, "init", "-q")

	// A send killed while it indexed: index-pack holds half the pack.
	ip := exec.Command("git", "index-pack", "--stdin")
	ip.Dir = dir
	in, err := ip.StdinPipe()
	must(t, err)
	must(t, ip.Start())
	in.Write(pack[:len(pack)/2])
	tmp := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/tmp_*"))
		return m
	}
	e.waitFor("index-pack's temporary pack", func() (bool, string) {
		fi, err := os.Stat(filepath.Join(dir, ".git/objects/pack"))
		return err == nil && fi.IsDir() && len(tmp()) > 0, strings.Join(tmp(), " ")
	})
	ip.Process.Kill()
	ip.Wait()
	if len(tmp()) == 0 {
		t.Fatal("the killed index-pack left no temporary pack: the test shows nothing")
	}

	e.mustVerb(nil, "begin", "--repo", "ktp", "--name", "tp", "--kind", "claude", "--id", "off1")
	if left := tmp(); len(left) > 0 {
		t.Errorf("begin left the killed send's temporary packs: %q", left)
	}
}

// packOf is a pack of every object of the repository at dir.
func packOf(t *testing.T, dir string) []byte {
	cmd := exec.Command("git", "pack-objects", "--revs", "--all", "--stdout", "-q")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	must(t, cmd.Run())
	return out.Bytes()
}
