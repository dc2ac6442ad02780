package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
)

func materialized(t *testing.T) *branchboxtest.Run {
	t.Helper()
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, nil))
	out, errs, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json")
	if code != 0 {
		t.Fatalf("materialize: exit %d: %s%s", code, out, errs)
	}
	// The outer helper fills the shared directory; the endpoint is live.
	ex := filepath.Join(r.Dir, "shared", "exchange")
	os.MkdirAll(filepath.Join(ex, "evidence"), 0o755)
	os.WriteFile(filepath.Join(ex, "evidence", "report.txt"), []byte("done\n"), 0o644)
	return r
}

func receipt(t *testing.T, out string) *feature.Receipt {
	t.Helper()
	var rc feature.Receipt
	if err := json.Unmarshal([]byte(out), &rc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return &rc
}

func TestMaterializeTwiceRefused(t *testing.T) {
	r := materialized(t)
	if out, _, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json"); code != exitInvalid || !strings.Contains(out, "already materialized") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// Contract: "managed in-guest teardown requires --force".
func TestSecurityContractManagedTeardownRequiresForce(t *testing.T) {
	r := materialized(t)
	out, _, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json")
	if code != exitInvalid || !strings.Contains(out, `"rule": "teardown-force"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "assignment.json")); err != nil {
		t.Fatalf("a refused teardown removed something: %v", err)
	}
}

// Contract: "Teardown removes every recorded materialization, including
// non-empty shared directories and Unix sockets ... and the replay
// ledger." The receipt is durable and names every path removed.
func TestSecurityContractTeardownRemovesEverything(t *testing.T) {
	r := materialized(t)
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	sock := filepath.Join(r.Dir, "tool-endpoints", "delivery.sock")
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatalf("the endpoint is not live: %v", err)
	} else {
		c.Close()
	}
	out, errs, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json", "--force")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	rc := receipt(t, out)
	if !rc.ResidueFree || len(rc.Residue) != 0 {
		t.Fatalf("residue: %+v", rc.Residue)
	}
	for _, p := range []string{sock, filepath.Join(r.Dir, "shared", "exchange", "evidence", "report.txt"), filepath.Join(r.Dir, "shared", "exchange"),
		filepath.Join(r.Dir, "materializations", "delivery-token"), r.Dir, ws, filepath.Join(ws, "README"),
		filepath.Join(r.Root, "state", branchboxtest.RunID, "ledger.json")} {
		if !slices.Contains(rc.Removed, p) {
			t.Errorf("the receipt does not name %s", p)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", p)
		}
	}
	stored, err := os.ReadFile(rc.Path)
	if err != nil {
		t.Fatal(err)
	}
	if back := receipt(t, string(stored)); !back.ResidueFree || len(back.Removed) != len(rc.Removed) {
		t.Fatalf("the stored receipt differs: %s", stored)
	}
	if st, _ := os.Stat(rc.Path); st.Mode().Perm() != 0o600 {
		t.Fatalf("receipt mode %v", st.Mode())
	}
	wt := branchboxtest.Git(t, r.Assignment["repository"].(map[string]any)["path"].(string), "worktree", "list")
	if strings.Contains(wt, ws) {
		t.Fatalf("git still lists the worktree: %s", wt)
	}
}

// Contract: "Any source that cannot be removed is reported as residue and
// prevents a residue-free teardown receipt." An immutable file (chattr +i)
// in the shared directory stays, and the receipt says so.
func TestSecurityContractTeardownResidue(t *testing.T) {
	r := materialized(t)
	stuck := filepath.Join(r.Dir, "shared", "exchange", "evidence", "report.txt")
	if out, err := exec.Command("chattr", "+i", stuck).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i (make setup installs e2fsprogs): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", stuck).Run() })
	out, _, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json", "--force")
	if code != exitFailed {
		t.Fatalf("exit %d: %s", code, out)
	}
	rc := receipt(t, out)
	if rc.ResidueFree {
		t.Fatal("a receipt with an immutable file left is residue-free")
	}
	var paths []string
	for _, res := range rc.Residue {
		paths = append(paths, res.Path)
	}
	if !slices.Contains(paths, stuck) || !slices.Contains(paths, r.Dir) {
		t.Fatalf("residue %v does not name %s and its run directory", rc.Residue, stuck)
	}
	if slices.Contains(rc.Removed, stuck) {
		t.Fatal("the receipt says the immutable file was removed")
	}
	// The rest went: the token, the socket, the ledger.
	for _, p := range []string{filepath.Join(r.Dir, "materializations", "delivery-token"), filepath.Join(r.Dir, "tool-endpoints", "delivery.sock")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", p)
		}
	}
	stored, _ := os.ReadFile(rc.Path)
	if !strings.Contains(string(stored), `"residue_free": false`) {
		t.Fatalf("the stored receipt: %s", stored)
	}
}

func TestTeardownVersion2NeedsNoForce(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, func(m map[string]any) { m["version"] = "2" }))
	if out, errs, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root); code != 0 {
		t.Fatalf("%s%s", out, errs)
	}
	if out, errs, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root); code != 0 || !strings.Contains(out, "residue-free true") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	if _, _, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root); code != exitNoInput {
		t.Fatalf("a second teardown: exit %d", code)
	}
}

// Bad input: a hostile assignment is refused by materialize with its rule,
// and nothing is materialized (no workspace, no ledger).
func TestMaterializeRefusesHostileAssignmentsAndMakesNothing(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(m map[string]any)
		rule string
	}{
		"LD_PRELOAD": {func(m map[string]any) {
			m["leases"].([]any)[1].(map[string]any)["materializations"].([]any)[0].(map[string]any)["environment_name"] = "LD_PRELOAD"
		}, "environment-name"},
		"expired lease": {func(m map[string]any) { m["leases"].([]any)[2].(map[string]any)["expires_at"] = "2001-01-01T00:00:00Z" }, "lease-expiry"},
		"tag-only image": {func(m map[string]any) {
			m["service_images"].(map[string]any)["app"] = "registry.example/team/app:latest"
		}, "immutable-image-reference"},
		"version 4": {func(m map[string]any) { m["version"] = "4" }, "version"},
	} {
		t.Run(name, func(t *testing.T) {
			r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, c.edit))
			out, _, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json")
			if code != exitInvalid || !strings.Contains(out, `"rule": "`+c.rule+`"`) {
				t.Fatalf("exit %d: %s", code, out)
			}
			ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
			for _, p := range []string{ws, filepath.Join(r.Root, "state")} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refusal", p)
				}
			}
		})
	}
}

// Exit 75 is for what a retry fixes: another branchbox working on the run.
func TestBusyRunIsTryAgainLater(t *testing.T) {
	r := materialized(t)
	lock, err := os.OpenFile(filepath.Join(r.Root, "locks", branchboxtest.RunID+".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	out, _, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--json", "--force")
	if code != exitTryLater || !strings.Contains(out, "holds the run's lock") {
		t.Fatalf("exit %d: %s", code, out)
	}
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, _, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force"); code != 0 {
		t.Fatalf("after the lock is released: exit %d", code)
	}
}
