package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

const consumer = 1001 // the example's workspace consumer (uid and gid)

func load(t *testing.T, r *branchboxtest.Run) *rundir.Run {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests run as root (make test does): they act as the runtime and as the consumer uid 1001")
	}
	run, err := rundir.Load(branchbox.Options{Root: r.Root, Now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, branchboxtest.RunID)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// asConsumer runs a shell script as uid and gid 1001 (no other groups)
// in dir, with umask 022, as a coding tool in the container would.
func asConsumer(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "umask 022; "+script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: consumer, Gid: consumer, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mode(t *testing.T, p string) (os.FileMode, uint32) {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode(), st.Sys().(*syscall.Stat_t).Gid
}

// Contract: "new worktree descendants inherit owner and consumer-group
// access with no other access, even below a previously world-readable
// directory", and "existing file and directory modes" are kept.
func TestDelegationNewFilesOwnerAndConsumerGroupOnly(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	ws := run.Assignment.Workspace.Path
	parent := filepath.Dir(ws)
	res, err := Checkout(run, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Delegated {
		t.Fatal("version 3 was not delegated")
	}
	if m, _ := mode(t, parent); m.Perm() != 0o755 {
		t.Fatalf("the existing parent's mode changed to %v", m)
	}
	// As the consumer: a directory made world-readable, files below it.
	out, err := asConsumer(t, ws, "mkdir open && chmod 0755 open && echo x >open/new && mkdir open/sub && echo y >open/sub/deeper && echo z >src/added")
	if err != nil {
		t.Fatalf("the consumer cannot write its workspace: %v: %s", err, out)
	}
	for _, p := range []string{"README", "src/main.go", "src", "open/new", "open/sub", "open/sub/deeper", "src/added"} {
		m, gid := mode(t, filepath.Join(ws, p))
		if m.Perm()&0o007 != 0 || m.Perm()&0o060 != 0o060 || gid != consumer {
			t.Errorf("%s: mode %v group %d; want group %d with read and write, nothing for others", p, m, gid, consumer)
		}
	}
	if m, _ := mode(t, filepath.Join(ws, "open")); m.Perm() != 0o755 {
		t.Errorf("the consumer's own chmod 0755 was not kept: %v", m)
	}
}

// Contract: "After delegation the consumer can also edit shared Git
// metadata". The control: without delegation (version 2) it cannot.
func TestDelegatedConsumerCanEditSharedGitMetadata(t *testing.T) {
	commit := "echo change >>README && git -c safe.directory='*' -c user.name=c -c user.email=c@example.invalid commit -qam 'by the consumer'"
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	if _, err := Checkout(run, false); err != nil {
		t.Fatal(err)
	}
	if out, err := asConsumer(t, run.Assignment.Workspace.Path, commit); err != nil {
		t.Fatalf("the delegated consumer cannot commit: %v: %s", err, out)
	}
	log := branchboxtest.Git(t, run.Assignment.Repository.Path, "log", "-1", "--format=%s", "refs/heads/"+run.Assignment.Branch)
	if log != "by the consumer" {
		t.Fatalf("the branch's head is %q", log)
	}

	r = branchboxtest.Lay(t, branchboxtest.WithRepo(t, func(m map[string]any) { m["version"] = "2" }))
	run = load(t, r)
	res, err := Checkout(run, false)
	if err != nil || res.Delegated {
		t.Fatalf("version 2 checkout: %+v %v", res, err)
	}
	if out, err := asConsumer(t, run.Assignment.Workspace.Path, commit); err == nil {
		t.Fatalf("control: an undelegated consumer committed: %s", out)
	}
}

// Contract: "BranchBox rejects shared Git metadata that is not
// runtime-owned or has group/other-writable paths, including a tree
// delegated by a previous run."
func TestGitMetadataDelegatedByAPreviousRunRefused(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	if _, err := Checkout(run, false); err != nil {
		t.Fatal(err)
	}
	repo, base := run.Assignment.Repository.Path, run.Assignment.Repository.Base
	r2 := branchboxtest.Lay(t, func(m map[string]any) {
		m["repository"] = map[string]any{"path": repo, "base": base}
		m["branch"] = "branchbox/second-run"
		m["workspace"].(map[string]any)["path"] = filepath.Join(branchboxtest.Dir0755(t), "second")
	})
	_, err := Checkout(load(t, r2), false)
	if branchbox.RuleOf(err) != branchbox.RuleGitMetadata || !strings.Contains(err.Error(), "group- or other-writable") {
		t.Fatalf("a delegated snapshot reused: %v", err)
	}
}

func TestGitMetadataNotRuntimeOwnedRefused(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	cfg := filepath.Join(run.Assignment.Repository.Path, ".git", "config")
	if err := os.Chown(cfg, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	_, err := Checkout(run, false)
	if branchbox.RuleOf(err) != branchbox.RuleGitMetadata || !strings.Contains(err.Error(), cfg) {
		t.Fatalf("%v", err)
	}
	if _, serr := os.Lstat(run.Assignment.Workspace.Path); serr == nil {
		t.Fatal("the workspace was made before the refusal")
	}
}

func TestGitMetadataSymlinkRefused(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	hooks := filepath.Join(run.Assignment.Repository.Path, ".git", "hooks", "post-checkout")
	if err := os.Symlink("/tmp/evil", hooks); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkout(run, false); branchbox.RuleOf(err) != branchbox.RuleGitMetadata {
		t.Fatalf("%v", err)
	}
}

// Contract: "It also rejects an ancestor that another UID could replace,
// apart from sticky directories such as /tmp."
func TestGitMetadataReplaceableAncestorRefused(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	above := filepath.Dir(run.Assignment.Repository.Path)
	if err := os.Chmod(above, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkout(run, false); branchbox.RuleOf(err) != branchbox.RuleGitMetadata || !strings.Contains(err.Error(), above) {
		t.Fatalf("%v", err)
	}
	if err := os.Chmod(above, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkout(run, false); err != nil {
		t.Fatalf("a sticky ancestor: %v", err)
	}
}

// Contract: "Managed launches also refuse --reuse and implicit
// stale-branch reuse".
func TestManagedRefusesReuseAndStaleBranches(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	run := load(t, r)
	if _, err := Checkout(run, true); branchbox.RuleOf(err) != branchbox.RuleReuse {
		t.Fatalf("--reuse: %v", err)
	}
	branchboxtest.Git(t, run.Assignment.Repository.Path, "branch", run.Assignment.Branch)
	if _, err := Checkout(run, false); branchbox.RuleOf(err) != branchbox.RuleReuse || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("stale branch: %v", err)
	}
}

func TestVersion2ReuseTakesTheExistingBranch(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, func(m map[string]any) { m["version"] = "2" }))
	run := load(t, r)
	branchboxtest.Git(t, run.Assignment.Repository.Path, "branch", run.Assignment.Branch)
	if _, err := Checkout(run, false); branchbox.RuleOf(err) != branchbox.RuleReuse {
		t.Fatalf("implicit reuse: %v", err)
	}
	if _, err := Checkout(run, true); err != nil {
		t.Fatalf("--reuse in version 2: %v", err)
	}
}
