//go:build booted

// The host packer's booted-box tests (issue 13;
// Contract: Offload, "Offload, Mac side" and "Back, Mac side"): real
// repositories on this host, one booted box shared by the subtests with
// the stand-in CLI as claude, real git, rsync and tmux on both sides. The
// box is reached through offloadbox.Transport (nsenter), a stand-in for
// `cocoonbox rsh` that needs no api, so the packer's cases run on a bare
// booted box; api/e2e/offload runs the real CLI through a real api.

package offload

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/box"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

// rig is one booted box with the stand-in CLI and a packer into it.
type rig struct {
	b     *box.Box
	tr    offloadbox.Transport
	image string
	// progress is read after each call returns, never while it writes.
	progress *bytes.Buffer
}

func newRig(t testing.TB) *rig {
	b := offloadbox.Boot(t, box.Options{})
	offloadbox.InstallStandin(t, b)
	return &rig{b: b, tr: offloadbox.NewTransport(t, b), image: "cbdesk:v" + imageVersion(t) + "-base", progress: &bytes.Buffer{}}
}

func imageVersion(t testing.TB) string {
	_, v, err := box.ImageVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// packer is a Packer for the rig's box with its own offload directory
// (XDG_DATA_HOME of this test).
func (r *rig) packer(t testing.TB, data string) *packer.Packer {
	return newPacker(data, r.tr, r.b.Name, r.image, r.progress)
}

// newPacker is a Packer into the box name of image through tr, its
// offload directory under data (XDG_DATA_HOME), its progress to w: the
// tests' and the child's they kill (kill_test.go).
func newPacker(data string, tr offloadbox.Transport, name, image string, w io.Writer) *packer.Packer {
	return &packer.Packer{Dirs: packer.Dirs{Root: filepath.Join(data, "cocoonbox/offload")}, Transport: tr,
		Box: packer.BoxInfo{ID: "cb-0000000000000001", Name: name, Image: image}, Progress: packer.Progress{W: w},
		Yes: true, BackWait: 90 * time.Second}
}

// repo is a host repository: two commits, an uncommitted change, a
// git-ignored .env, target/ and node_modules/ ignored; its hand-over
// (extra lines are the stand-in's directives) in the packer's place.
func repo(t testing.TB, p *packer.Packer, name string, handoverExtra ...string) (top, key string) {
	top = filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(top, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, top, "init", "-q")
	write(t, top, ".gitignore", "target/\nnode_modules/\n.env\n")
	write(t, top, "a.txt", "one\n")
	write(t, top, "b.txt", "b one\n")
	write(t, top, "c.txt", "c one\n")
	git(t, top, "add", ".")
	git(t, top, "commit", "-q", "-m", "one")
	write(t, top, "a.txt", "two\n")
	git(t, top, "commit", "-q", "-am", "two")
	write(t, top, "a.txt", "two, uncommitted\n")
	write(t, top, ".env", "TOKEN=host-dotenv-never-sent\n")
	key = packer.RepoKey(top)
	if err := p.Dirs.Ensure(key); err != nil {
		t.Fatal(err)
	}
	write(t, p.Dirs.Repo(key), "handover.md", offloadtest.Handover("a task for the box", handoverExtra...))
	return top, key
}

// offloadRepo runs an offload and fails the test on an error.
func offloadRepo(t testing.TB, p *packer.Packer, top string) *packer.OffloadResult {
	t.Helper()
	res, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
	if err != nil {
		t.Fatalf("offload: %v", err)
	}
	if !res.Accepted {
		t.Fatalf("the box CLI did not take the first prompt: %+v", res)
	}
	return res
}

// state is what an offload or a refused back must leave as it was
// (offloadtest.State).
var state = offloadtest.State
