// Package testenv decides what a test does when this machine cannot run
// it: skip, when a developer runs `go test` by hand as a normal user; fail,
// under `make test` and CI, which set NoSkipEnv, so a run that is not root
// (or lacks systemd-nspawn) cannot stay green while checking nothing.
package testenv

import (
	"os"
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
