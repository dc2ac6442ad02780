package offloadtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/internal/gitcmd"
)

// Sync is how a test's Mac side fills the box's copy: rsync -a --delete
// with the excludes file (--from0, each path literal, as the packer
// writes it), --exclude=/.git/objects/, and for a linked
// worktree --exclude=/.git, into the copy (locally or through a remote
// shell).
type Sync func(rsyncArgs []string)

// MacStream does the host packer's part of an offload between begin and
// send (Contract: Offload, Mac side), as the box side's tests need it: S
// at refs/cocoonbox/base/<id>; the rsync (sync) without the host's
// ignored paths and begin's ignored, each anchored at the top; the bundle
// of what begin's refs lack, with the index's tree held at
// refs/cocoonbox/index meanwhile (packer.IndexRef, which this package
// cannot import: packer's tests import it), left out when git refuses it
// as empty; and the send stream: the hand-over, env.json, the bundle, a
// linked worktree's HEAD and index, then extra.
func MacStream(t testing.TB, host, id, handover string, begin map[string]any, sync Sync, extra ...[2]string) []byte {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(host, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	linked := fi.Mode().IsRegular()
	s, err := gitcmd.Snapshot(host, "S", false)
	if err != nil {
		t.Fatal(err)
	}
	Git(t, host, "update-ref", "refs/cocoonbox/base/"+id, s)

	ignored, err := gitcmd.Ignored(host)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := begin["ignored"].([]any)
	for _, l := range list {
		ignored = append(ignored, l.(string))
	}
	var rules []string
	for _, l := range ignored {
		rules = append(rules, "/"+offload.RsyncLiteral(l))
	}
	dir := t.TempDir()
	excludes := filepath.Join(dir, "excludes")
	if err := os.WriteFile(excludes, offload.RsyncRules(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-a", "--delete", "--from0", "--exclude-from=" + excludes, "--exclude=/.git/objects/"}
	if linked {
		args = append(args, "--exclude=/.git")
	}
	sync(args)

	var not strings.Builder
	refs, _ := begin["refs"].(map[string]any)
	for _, oid := range refs {
		not.WriteString("^" + oid.(string) + "\n")
	}
	Git(t, host, "update-ref", "refs/cocoonbox/index", Git(t, host, "write-tree"))
	bundle := filepath.Join(dir, "offload.bundle")
	cmd := exec.Command("git", "bundle", "create", "-q", bundle, "--all", "--stdin")
	cmd.Dir, cmd.Stdin = host, strings.NewReader(not.String())
	out, err := cmd.CombinedOutput()
	Git(t, host, "update-ref", "-d", "refs/cocoonbox/index")
	members := [][2]string{{"handover.md", handover},
		{"env.json", `{"v":1,"tools":{},"package_managers":{},"files":[],"lockfiles":[]}`}}
	switch {
	case err == nil:
		members = append(members, [2]string{"offload.bundle", Read(t, dir, "offload.bundle")})
	case !strings.Contains(string(out), "Refusing to create empty bundle"):
		t.Fatalf("git bundle create: %v: %s", err, out)
	}
	if linked {
		head, herr := gitcmd.GitPath(host, "HEAD")
		index, ierr := gitcmd.GitPath(host, "index")
		if herr != nil || ierr != nil {
			t.Fatal(herr, ierr)
		}
		members = append(members, [2]string{"HEAD", Read(t, "/", head)}, [2]string{"index", Read(t, "/", index)})
	}
	return TarOf(t, append(members, extra...)...)
}

// CopyChecks are the git commands whose output in the box's copy must
// equal the host's after send: HEAD, the status, the staged diff and the
// refs under refs/heads and refs/remotes (a symref stays one, but in a
// linked worktree's copy, which the bundle alone builds, since a bundle
// cannot carry a symref).
func CopyChecks(linked bool) [][]string {
	refs := "%(refname) %(objectname) %(symref)"
	if linked {
		refs = "%(refname) %(objectname)"
	}
	return [][]string{
		{"rev-parse", "HEAD"},
		{"status", "--porcelain", "-z", "--untracked-files=all"},
		{"diff", "--cached"},
		{"for-each-ref", "--format=" + refs, "refs/heads", "refs/remotes"},
	}
}
