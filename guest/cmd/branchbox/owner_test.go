package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// runtimeUID is the contract's guest-side owner ("UID 10001 in the guest").
const runtimeUID = 10001

// chownTree gives a laid-out run (and, when repo is set, the repository)
// to the runtime owner, as an orchestrator running as that user makes it.
func chownTree(t *testing.T, paths ...string) {
	t.Helper()
	for _, root := range paths {
		err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, runtimeUID, runtimeUID)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// asUID runs the real branchbox as uid (and gid) with env.
func asUID(t *testing.T, uid uint32, env []string, args ...string) (string, int) {
	t.Helper()
	// A copy the user can reach: go test's build directory is root's 0700.
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(branchboxtest.Dir0755(t), "branchbox")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"BRANCHBOX_TEST_AS_MAIN=1"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// The whole life of a run owned by uid 10001 with branchbox as root: git
// runs as the owner, the provider as the consumer, teardown as root.
func TestRunOwnedByTheGuestRuntimeUser(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, func(m map[string]any) {
		m["leases"].([]any)[0].(map[string]any)["executable"] = "id"
	}))
	repo := r.Assignment["repository"].(map[string]any)["path"].(string)
	chownTree(t, r.Dir, repo)
	args := func(verb string, extra ...string) []string {
		return append([]string{"feature", verb, "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root}, extra...)
	}
	if out, errs, code := runIn(args("check")...); code != 0 || !strings.Contains(out, "owner uid 10001") {
		t.Fatalf("check: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := runIn(args("materialize")...); code != 0 {
		t.Fatalf("materialize: exit %d: %s%s", code, out, errs)
	}
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(ws, "README"), &st); err != nil || st.Uid != runtimeUID || st.Gid != 1001 {
		t.Fatalf("the checkout is uid %d gid %d, want the runtime 10001 and the consumer's group 1001 (%v)", st.Uid, st.Gid, err)
	}
	out, errs, code := runChild(t, []string{"MODEL_ACCESS_TOKEN=x"}, args("exec", "--consumer", "coding-agent", "--executable", "id", "--inherit", "MODEL_ACCESS_TOKEN")...)
	if code != 0 || !strings.HasPrefix(string(out), "uid=1001 gid=1001") {
		t.Fatalf("exec: exit %d: %s%s", code, out, errs)
	}
	if out, errs, code := runIn(args("teardown", "--force")...); code != 0 {
		t.Fatalf("teardown: exit %d: %s%s", code, out, errs)
	}
}

// branchbox run by the owner itself checks the run; run by another
// unprivileged user it refuses, naming who may.
func TestCheckAsTheOwnerAndAsAnotherUser(t *testing.T) {
	r := branchboxtest.Lay(t, nil)
	chownTree(t, r.Dir)
	if err := os.Chmod(r.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"feature", "check", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root}
	if out, code := asUID(t, runtimeUID, nil, args...); code != 0 {
		t.Fatalf("as the owner: exit %d: %s", code, out)
	}
	if out, code := asUID(t, 1000, nil, args...); code != exitUnsafe || !strings.Contains(out, "run branchbox as root or as the run's owner") {
		t.Fatalf("as uid 1000: exit %d: %s", code, out)
	}
}
