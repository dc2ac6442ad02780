//go:build booted

package packages_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Packages. "It never orders the desktop behind it (Wants= only)":
// the box's boot, which the api waits for (the READY=1 its systemd sends
// when the boot's job queue is empty, the moment `systemctl
// is-system-running --wait` returns), ends while the reconcile pulled in at
// the desktop's start still runs; the reconcile goes on to its end after
// the boot, and its outcome is in the unit's result and the journal.
//
// The box comes up as after an Upgrade onto a new image: the home's list
// names a package the image lacks. A dpkg-query first in PATH holds the
// reconcile at its first step until the test lets it go, so the reconcile
// is as slow as an apt run of minutes, for as long as the test needs. Were
// the boot to wait for the reconcile, it would never finish, and the box
// would not boot within the harness's 90 s (the supervisor's BootTimeout
// too).
func TestBootEndsWhileTheReconcileRuns(t *testing.T) {
	t.Parallel()
	const released = "/run/cbtest-reconcile-go"
	dir := t.TempDir()
	gate := filepath.Join(dir, "dpkg-query")
	script := "#!/bin/sh\n# cbtest: the reconcile waits here until the test lets it go.\n" +
		"while [ ! -e " + released + " ]; do sleep 0.2; done\nexec /usr/bin/dpkg-query \"$@\"\n"
	if err := os.WriteFile(gate, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := box.Options{Image: box.Image(t), Args: []string{
		listAtBoot(t, "hello\n"),
		"--bind-ro=" + gate + ":/usr/local/sbin/dpkg-query",
	}}
	b, err := box.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("the box's boot did not end while the reconcile was held (the api's Boot would time out the same way): %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(b.Diagnostics(400))
		}
		b.Stop()
		os.Remove(b.Console)
	})
	mgr := func(p string) string {
		out, _ := b.Run("systemctl", "show", "-P", p)
		return strings.TrimSpace(out)
	}
	finished := mgr("FinishTimestampMonotonic")
	if finished == "" || finished == "0" {
		t.Fatalf("the box answered running but its systemd has no FinishTimestamp (%q)", finished)
	}
	// The boot is over and the reconcile is still at its first step.
	if st, sub := prop(b, "ActiveState"), prop(b, "SubState"); st != "active" || sub != "running" {
		t.Errorf("at the boot's end %s is %s (%s), want active (running): the reconcile held by the test", unit, st, sub)
	}
	if jobs := strings.TrimSpace(b.Must(t, "systemctl", "list-jobs", "--no-legend")); jobs != "" {
		t.Errorf("jobs left at the boot's end: %q", jobs)
	}
	if state, _ := b.Run("systemctl", "is-system-running"); strings.TrimSpace(state) != "running" {
		t.Errorf("systemctl is-system-running = %q, want running", strings.TrimSpace(state))
	}

	// Let it go: it runs to its end after the boot, apt included.
	b.Must(t, "touch", released)
	box.Eventually(t, 8*time.Minute, "the reconcile to end", func() (bool, string) {
		st := prop(b, "ActiveState")
		return st == "inactive" || st == "failed", st
	})
	if r, code := prop(b, "Result"), prop(b, "ExecMainStatus"); r != "success" || code != "0" {
		t.Errorf("the reconcile ended with Result=%s ExecMainStatus=%s, want success 0", r, code)
	}
	if !installed(b, "hello") {
		t.Error("hello, listed and missing, is not installed after the reconcile")
	}
	if got := journal(b, msgInstalled); len(got) != 1 || !strings.Contains(got[0], "hello") {
		t.Errorf("journal installed entries = %q, want one naming hello", got)
	}
	end, _ := strconv.ParseUint(prop(b, "ExecMainExitTimestampMonotonic"), 10, 64)
	fin, _ := strconv.ParseUint(finished, 10, 64)
	if end <= fin {
		t.Errorf("the reconcile's end (%d µs) is not after the boot's end (%d µs)", end, fin)
	}
	t.Logf("boot ended at %s, the reconcile at %s (monotonic)", fmtMicros(fin), fmtMicros(end))
}

func fmtMicros(us uint64) string { return fmt.Sprintf("%.3f s", float64(us)/1e6) }

// listAtBoot returns the systemd-nspawn argument that gives a box, from its
// first moment, a ~/.config holding the package list content, as a home
// carried to a new image brings it: a host directory bound read-only over
// /home/user/.config (the image has none). The box's user is uid 1000
// (Contract: Desktop user); the list and the directories above it up to the
// home must be user's, or the reconciler refuses them.
func listAtBoot(t testing.TB, content string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config")
	if err := os.MkdirAll(filepath.Join(config, "cocoonbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "cocoonbox", "packages"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{config, filepath.Join(config, "cocoonbox"), filepath.Join(config, "cocoonbox", "packages")} {
		if err := os.Chown(p, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	return "--bind-ro=" + config + ":/home/user/.config"
}
