// Package testenv decides what a test does when this machine cannot run
// it: skip, when a developer runs `go test` by hand as a normal user; fail,
// under `make test` and CI, which set NoSkipEnv, so a run that is not root
// (or lacks systemd-nspawn) cannot stay green while checking nothing.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// NoSkipEnv names the variable the Makefile sets to 1 for every test run.
const NoSkipEnv = "COCOONBOX_NO_SKIP"

// SkipOrFail stops the test because it cannot run here, for the reason
// why: it skips, or, with NoSkipEnv=1, fails saying why.
func SkipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(NoSkipEnv) == "1" {
		t.Fatalf("%s (%s=1: under make test a test that cannot run fails instead of skipping)", why, NoSkipEnv)
	}
	t.Skip(why)
}

// RequireRoot stops the test unless it runs as root (SkipOrFail).
func RequireRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, what+" needs root")
	}
}

// netNSChildEnv marks the process InOwnNetNS started: its value is the
// test's name.
const netNSChildEnv = "COCOONBOX_TEST_NETNS"

// InOwnNetNS answers true in a copy of the test binary that runs t alone
// in a network namespace of its own (nothing it sends can leave it, and
// its addresses are the test's to choose), where the caller then does
// the test's work. Elsewhere it starts that copy (root: RequireRoot),
// fails t unless the copy's t passed, logs its output and answers false.
func InOwnNetNS(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netNSChildEnv) == t.Name() {
		return true
	}
	RequireRoot(t, "a network namespace of the test's own")
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netNSChildEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("the run in a network namespace: %v\n%s", err, out)
	}
	t.Logf("the run in a network namespace:\n%s", out)
	return false
}

// ErrUntagged is the refusal of a test that boots a machine in a binary
// built without the booted tag: its file lacks `//go:build booted`, so
// the unit tests' run would boot it (and box-test would miss it).
const ErrUntagged = "this test boots a machine but its file lacks //go:build booted (make box-test runs the files that carry it; make unit-test must not boot)"
