//go:build booted

package offload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload/offloadtest"
	"github.com/cocoonbox/cocoonbox/packer"
)

// realBundle is a public repository's history, committed as a fixture
// (issue 39, Must show: "the real-repository round trip"): google/uuid's
// master, 166 commits up to 2d3c2a9 (2024-11-14), BSD-3-Clause (its
// LICENSE travels in the bundle), made with `git bundle create
// google-uuid.bundle master`.
const realBundle = "testdata/google-uuid.bundle"

// Contract: Offload, "Offload, Mac side" and "Back, Mac side", on the
// shape the world has: a clone with a remote (a local bare copy as
// origin), a feature branch one commit ahead of it, a staged change, an
// unstaged one, an untracked file and a file the clone's own
// .git/info/exclude ignores. The box gets the whole history and the work
// as it is (the index too), never the ignored file; back fast-forwards
// the branch onto the box's commit with the user's work byte for byte,
// and the remote-tracking refs and the repository's integrity untouched.
func realRepository(t *testing.T, r *rig) {
	bundle, err := filepath.Abs(realBundle)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	origin, top := filepath.Join(root, "uuid.git"), filepath.Join(root, "uuid")
	git(t, root, "clone", "-q", "--bare", "--branch", "master", bundle, origin)
	git(t, root, "clone", "-q", origin, top)
	git(t, top, "switch", "-q", "-c", "feature/nil-doc")
	write(t, top, "doc.go", read(t, top, "doc.go")+"\n// Nil is the all-zero UUID.\n")
	git(t, top, "-c", "user.name=dev", "-c", "user.email=dev@invalid", "commit", "-q", "-am", "doc: say what Nil is")
	write(t, top, "hash.go", read(t, top, "hash.go")+"\n// staged by the developer\n")
	git(t, top, "add", "hash.go")
	write(t, top, "uuid.go", read(t, top, "uuid.go")+"\n// unstaged, by the developer\n")
	write(t, top, "notes.md", "untracked notes\n")
	write(t, top, ".git/info/exclude", "coverage.out\n")
	write(t, top, "coverage.out", "mode: set\nthe developer's local coverage, never sent\n")

	p := r.packer(t, t.TempDir())
	key := packer.RepoKey(top)
	if err := p.Dirs.Ensure(key); err != nil {
		t.Fatal(err)
	}
	write(t, p.Dirs.Repo(key), "handover.md", offloadtest.Handover("document the package", "standin: commit"))
	head, origins := git(t, top, "rev-parse", "HEAD"), git(t, top, "for-each-ref", "refs/remotes")
	staged, unstaged := git(t, top, "diff", "--cached"), git(t, top, "diff")
	commits := git(t, top, "rev-list", "--count", "HEAD")

	res := offloadRepo(t, p, top)
	copyDir := "/workspace/" + res.Name
	if got := strings.TrimSpace(r.b.MustSh(t, "runuser -u user -- git -C "+copyDir+" rev-list --count "+res.Base+"^")); got != commits {
		t.Errorf("the box's copy has %s commits under S, want the clone's %s", got, commits)
	}
	for f, want := range map[string]string{"notes.md": "untracked notes\n", "uuid.go": read(t, top, "uuid.go"), "hash.go": read(t, top, "hash.go")} {
		if got := r.b.MustSh(t, "cat "+copyDir+"/"+f); got != want {
			t.Errorf("the box's %s differs from the clone's (%d bytes, want %d)", f, len(got), len(want))
		}
	}
	if out, _ := r.b.Sh("test -e " + copyDir + "/coverage.out && echo present"); strings.Contains(out, "present") {
		t.Error("coverage.out, ignored by .git/info/exclude, reached the box")
	}

	back, err := p.Back(context.Background(), top, false)
	if err != nil {
		t.Fatalf("back: %v\nprogress:\n%s", err, r.progress)
	}
	if back.Merge.Case != packer.CaseFastForward {
		t.Fatalf("back: %+v, want a fast-forward", back.Merge)
	}
	if got := git(t, top, "rev-parse", "HEAD~1"); got != head {
		t.Errorf("the box's commit's parent is %s, want the branch's %s", got, head)
	}
	if got := git(t, top, "branch", "--show-current"); got != "feature/nil-doc" {
		t.Errorf("the checked-out branch is %q after back", got)
	}
	// The box's copy has the index the user left (hash.go staged), so the
	// agent's plain git commit took the staged change with its own, as it
	// would here: the change is a commit now, byte for byte, not lost.
	if got := git(t, top, "diff", "--cached"); got != "" {
		t.Errorf("staged after back:\n%s\nstatus:\n%s", got, git(t, top, "status", "--short"))
	}
	if got := git(t, top, "diff", "HEAD~1", "HEAD", "--", "hash.go"); got != staged {
		t.Errorf("the box's commit's hash.go change:\n%s\nwant the one the user staged:\n%s", got, staged)
	}
	if got := git(t, top, "diff"); got != unstaged {
		t.Errorf("the unstaged change differs after back:\n%s\nwas\n%s", got, unstaged)
	}
	if got := read(t, top, "notes.md"); got != "untracked notes\n" {
		t.Errorf("notes.md = %q", got)
	}
	if got := git(t, top, "for-each-ref", "refs/remotes"); got != origins {
		t.Errorf("the remote-tracking refs moved:\n%s\nwere\n%s", got, origins)
	}
	git(t, top, "fsck", "--no-progress", "--strict")
	if _, err := os.Stat(filepath.Join(top, "coverage.out")); err != nil {
		t.Errorf("coverage.out: %v", err)
	}
}
