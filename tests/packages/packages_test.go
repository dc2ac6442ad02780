//go:build booted

package packages_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Packages. "user installs a package with sudo apt-get install:
// the list names it; removes it: it drops out."
func TestUserAptInstallIsRecordedAndRemovalDropsIt(t *testing.T) {
	t.Parallel()
	b := boot(t)
	aptAsUser(t, b, "update")
	aptAsUser(t, b, "install", "sl")
	list, err := b.ReadFile(listPath)
	if err != nil {
		t.Fatalf("no list after sudo apt-get install sl: %v", err)
	}
	if string(list) != "sl\n" {
		t.Errorf("list after installing sl = %q, want \"sl\\n\" (baseline packages and sl's automatic dependencies left out)", list)
	}
	if st := strings.TrimSpace(b.MustSh(t, "stat -c '%U:%G %a %F' "+listPath)); st != "user:user 644 regular file" {
		t.Errorf("list is %q, want a regular file user:user 644", st)
	}
	// The hook's list is apt-mark's view: manual beyond the baseline.
	want := b.MustSh(t, `bash -c 'export LC_ALL=C; comm -23 <(apt-mark showmanual | sort) <(sort /etc/cocoonbox/packages.baseline)'`)
	if string(list) != want {
		t.Errorf("list %q differs from apt-mark showmanual beyond the baseline %q", list, want)
	}
	aptAsUser(t, b, "remove", "sl")
	list, _ = b.ReadFile(listPath)
	if string(list) != "" {
		t.Errorf("list after removing sl = %q, want it empty", list)
	}
	if got := journal(b, msgRecorded); len(got) < 2 {
		t.Errorf("journal has %d record entries, want one per apt run: %q", len(got), got)
	}
}

// Contract: Packages. "A box whose list names a package it lacks: starting
// the unit installs it."
func TestStartingTheUnitInstallsAMissingListedPackage(t *testing.T) {
	t.Parallel()
	b := boot(t)
	writeList(t, b, "hello\n")
	if installed(b, "hello") {
		t.Fatal("the image already has hello")
	}
	if rc := start(t, b); rc != 0 {
		t.Fatalf("systemctl start %s exited %d", unit, rc)
	}
	if !installed(b, "hello") {
		t.Fatal("hello is not installed after the unit ran")
	}
	if out, _ := b.RunAs("user", "/usr/bin/hello"); !strings.Contains(out, "Hello, world!") {
		t.Errorf("hello runs as %q", out)
	}
	if got := journal(b, msgInstalled); len(got) != 1 || !strings.Contains(got[0], "hello") {
		t.Errorf("journal installed entries = %q, want one naming hello", got)
	}
	if list, _ := b.ReadFile(listPath); string(list) != "hello\n" {
		t.Errorf("the list changed to %q", list)
	}
}

// Contract: Packages. "A list with a nonexistent package and a real one:
// the real one is installed, the unit fails, and it is not retried."
func TestNonexistentAndRealPackageRealInstalledUnitFailsNotRetried(t *testing.T) {
	t.Parallel()
	b := boot(t)
	shorten(t, b) // RestartSec=2: a retry would show within the wait below
	writeList(t, b, "cocoonbox-no-such-package\nsl\n")
	if rc := start(t, b); rc == 0 {
		t.Fatal("the unit succeeded with a nonexistent package listed")
	}
	if !installed(b, "sl") {
		t.Error("the real package sl is not installed")
	}
	// A restart would be decided at the exit: the unit would pass through
	// failed to activating (auto-restart), never stay failed. Failed with
	// no job queued means systemd will not retry; no sleep is needed to
	// see it.
	box.Eventually(t, 30*time.Second, "the unit failed for good", func() (bool, string) {
		st, code, n := prop(b, "ActiveState"), prop(b, "ExecMainStatus"), prop(b, "NRestarts")
		return st == "failed" && code == "1" && n == "0", fmt.Sprintf("ActiveState=%s ExecMainStatus=%s NRestarts=%s", st, code, n)
	})
	if jobs := b.Must(t, "systemctl", "list-jobs", "--no-legend", "cocoonbox-packages.service"); strings.TrimSpace(jobs) != "" {
		t.Errorf("a job is queued for the failed unit: %q", jobs)
	}
	failed := journal(b, msgFailed)
	if len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), "cocoonbox-no-such-package") {
		t.Errorf("journal failure entries %q do not name the nonexistent package", failed)
	}
	if got := journal(b, msgInstalled); len(got) != 1 || !strings.Contains(got[0], "sl") {
		t.Errorf("journal installed entries = %q, want one naming sl", got)
	}
}

// Contract: Packages. "The dpkg lock held by the test: exit 75, the unit
// retries, and installs once the lock is free."
func TestDpkgLockHeldExits75RetriesAndInstallsOnceFree(t *testing.T) {
	t.Parallel()
	b := boot(t)
	shorten(t, b) // lock wait 3 s, RestartSec=2
	holder := buildLockHolder(t, b)
	b.Must(t, "systemd-run", "--unit=cbtest-dpkglock", "--", holder, "-ready", "/run/cbtest-dpkglock.ready",
		"/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
	waitFor(t, 20*time.Second, "the lock holder", func() bool {
		_, err := b.Run("test", "-e", "/run/cbtest-dpkglock.ready")
		return err == nil
	})
	writeList(t, b, "hello\n")
	b.Must(t, "systemctl", "start", "--no-block", unit)
	waitFor(t, 60*time.Second, "two failed runs with the lock held", func() bool {
		n := 0
		fmt.Sscan(prop(b, "NRestarts"), &n)
		return n >= 2
	})
	// Each failed run's status, from systemd's own journal lines (the unit's
	// ExecMainStatus resets as soon as the retry starts).
	sys, _ := b.Run("journalctl", "-m", "--no-pager", "-o", "cat", "_PID=1", "-u", unit)
	if n := strings.Count(sys, "Main process exited, code=exited, status=75/TEMPFAIL"); n < 2 {
		t.Errorf("systemd saw %d runs exit 75 with the lock held, want at least 2:\n%s", n, sys)
	}
	if strings.Contains(sys, "status=1/FAILURE") {
		t.Errorf("a run failed with status 1 while the lock was held:\n%s", sys)
	}
	if installed(b, "hello") {
		t.Fatal("hello got installed while the lock was held")
	}
	if busy := journal(b, msgLockBusy); len(busy) == 0 {
		t.Error("no lock-busy entry in the journal")
	}
	b.Must(t, "systemctl", "stop", "cbtest-dpkglock.service")
	waitFor(t, 8*time.Minute, "the unit to install hello once the lock is free", func() bool {
		return installed(b, "hello") && prop(b, "ActiveState") == "inactive"
	})
	if r, code := prop(b, "Result"), prop(b, "ExecMainStatus"); r != "success" || code != "0" {
		t.Errorf("after the lock was freed: Result=%s ExecMainStatus=%s, want success 0", r, code)
	}
}

// Contract: Packages. "Nothing missing: no apt-get update runs", and the
// check is one dpkg-query.
func TestNothingMissingRunsNoAptGetUpdate(t *testing.T) {
	t.Parallel()
	b := boot(t)
	wrapExec(t, b)
	// Every package of the image, bare and arch-qualified: all installed.
	b.MustSh(t, `mkdir -p /home/user/.config/cocoonbox && { cat /etc/cocoonbox/packages.baseline; sed "s/\$/:$(dpkg --print-architecture)/" /etc/cocoonbox/packages.baseline | head -n 100; } >`+listPath+` && chown -R user:user /home/user/.config`)
	before := b.MustSh(t, "ls -la --time-style=full-iso /var/lib/apt/lists /var/lib/apt/lists/partial 2>&1; stat -c %y /var/cache/apt 2>&1")
	if rc := start(t, b); rc != 0 {
		t.Fatalf("systemctl start %s exited %d", unit, rc)
	}
	if q := execs(b, "dpkg-query"); len(q) != 1 {
		t.Errorf("dpkg-query ran %d times, want exactly once: %q", len(q), q)
	}
	if a := execs(b, "apt-get"); len(a) != 0 {
		t.Errorf("apt-get ran with nothing missing: %q", a)
	}
	after := b.MustSh(t, "ls -la --time-style=full-iso /var/lib/apt/lists /var/lib/apt/lists/partial 2>&1; stat -c %y /var/cache/apt 2>&1")
	if before != after {
		t.Errorf("apt's lists changed:\nbefore %s\nafter %s", before, after)
	}
	// (The boot's own run, pulled in by the session, found no list.)
	var allThere []string
	for _, m := range journal(b, msgNothing) {
		if strings.Contains(m, "are installed: nothing to do") {
			allThere = append(allThere, m)
		}
	}
	if len(allThere) != 1 {
		t.Errorf("journal all-installed entries = %q, want one", allThere)
	}
}

// Contract: Packages. "Lines like -oAPT::Get::Foo=1, foo; rm -rf /, an
// empty line, a 10 KiB line: refused and logged, never passed to apt."
func TestHostileLinesRefusedLoggedNeverPassedToApt(t *testing.T) {
	t.Parallel()
	b := boot(t)
	wrapExec(t, b)
	writeList(t, b, "-oAPT::Get::Foo=1\nfoo; rm -rf /\n\n"+strings.Repeat("x", 10<<10)+"\ncowsay\n")
	if rc := start(t, b); rc != 0 {
		t.Fatalf("systemctl start %s exited %d (the valid line should go on)", unit, rc)
	}
	if !installed(b, "cowsay") {
		t.Error("the valid line's package cowsay is not installed")
	}
	runs := append(execs(b, "apt-get"), execs(b, "dpkg-query")...)
	if len(runs) < 2 {
		t.Fatalf("the wrappers saw only %q", runs)
	}
	for _, r := range runs {
		if strings.Contains(r, "APT::Get::Foo") || strings.Contains(r, "rm -rf") || strings.Contains(r, "foo;") || strings.Contains(r, "xxxxxxxx") {
			t.Errorf("a refused line reached a command: %q", r)
		}
	}
	refused := journal(b, msgRefused)
	if len(refused) != 4 {
		t.Fatalf("journal has %d refusal entries, want 4: %q", len(refused), refused)
	}
	for i, r := range refused {
		if !strings.Contains(r, fmt.Sprintf("line %d ", i+1)) {
			t.Errorf("refusal %q does not name line %d", r, i+1)
		}
	}
	if out, _ := b.Run("journalctl", "-m", "-o", "verbose", "MESSAGE_ID="+msgRefused, "--no-pager"); !strings.Contains(out, "COCOONBOX_LINE=4") {
		t.Errorf("no COCOONBOX_LINE field on the refusals")
	}
}

// Contract: Packages. "~/.config/cocoonbox/packages made a symlink to
// /etc/shadow before an apt run: /etc/shadow is untouched." Also a
// symlinked ~/.config: nothing is written through it.
func TestListSymlinkToShadowLeavesShadowUntouched(t *testing.T) {
	t.Parallel()
	b := boot(t)
	const fingerprint = "sha256sum /etc/shadow; stat -c '%U:%G %a %s %Y %i' /etc/shadow"
	shadow := b.MustSh(t, fingerprint)
	if _, err := b.RunAs("user", "sh", "-c", "mkdir -p ~/.config/cocoonbox && ln -s /etc/shadow ~/.config/cocoonbox/packages"); err != nil {
		t.Fatal(err)
	}
	// An apt run that invokes dpkg without the network: removing a
	// baseline package.
	aptAsUser(t, b, "purge", "less")
	if got := b.MustSh(t, fingerprint); got != shadow {
		t.Fatalf("/etc/shadow changed:\nbefore %s\nafter  %s", shadow, got)
	}
	if st := strings.TrimSpace(b.MustSh(t, "stat -c '%U:%G %F' "+listPath)); !strings.HasPrefix(st, "user:user regular") {
		t.Errorf("the list is %q, want the symlink replaced by user's regular file", st)
	}
	if rec := journal(b, msgReplaced); len(rec) == 0 || !strings.Contains(rec[len(rec)-1], "symlink") {
		t.Errorf("journal record entries %q do not say a symlink was replaced", rec)
	}

	// ~/.config itself a symlink to /etc: the hook writes nothing through it.
	b.MustSh(t, "rm -rf /home/user/.config && runuser -u user -- ln -s /etc /home/user/.config")
	aptAsUser(t, b, "purge", "tmux")
	if _, err := b.Run("test", "-e", "/etc/cocoonbox/packages"); err == nil {
		t.Error("the hook wrote /etc/cocoonbox/packages through the symlinked ~/.config")
	}
	if got := b.MustSh(t, fingerprint); got != shadow {
		t.Fatalf("/etc/shadow changed:\nbefore %s\nafter  %s", shadow, got)
	}
}

// Contract: Packages. The baseline is the image's apt-mark showmanual, and
// the hook's own computation of "manual" agrees with apt-mark in a box.
func TestBaselineIsTheImagesAptMarkShowmanual(t *testing.T) {
	t.Parallel()
	b := boot(t)
	if diff, err := b.Sh("apt-mark showmanual | diff - /etc/cocoonbox/packages.baseline"); err != nil {
		t.Errorf("baseline differs from apt-mark showmanual: %v\n%s", err, diff)
	}
	if st := strings.TrimSpace(b.MustSh(t, "stat -c '%U:%G %a' /etc/cocoonbox/packages.baseline")); st != "root:root 644" {
		t.Errorf("baseline is %s, want root:root 644", st)
	}
}

// Contract: Packages. "pulled in by cocoonbox-session.service (so it runs
// on every desktop start including after a restore) ... It never orders the
// desktop behind it (Wants= only)". The base tier's session is a stand-in;
// the drop-in applies to the desk tier's unit alike.
func TestSessionStartPullsInTheReconcilerWithWantsOnly(t *testing.T) {
	t.Parallel()
	b := boot(t)
	sessionProp := func(p string) string {
		out, _ := b.Run("systemctl", "show", "-P", p, "cocoonbox-session.service")
		return out
	}
	if st := strings.TrimSpace(sessionProp("LoadState")); st != "loaded" {
		t.Fatalf("cocoonbox-session.service is %s", st)
	}
	if !strings.Contains(sessionProp("Wants"), unit) {
		t.Errorf("cocoonbox-session.service Wants=%q, want %s", sessionProp("Wants"), unit)
	}
	for _, p := range []string{"After", "Requires", "Requisite", "BindsTo"} {
		if strings.Contains(sessionProp(p), unit) {
			t.Errorf("cocoonbox-session.service %s= names %s: the desktop would wait for or fail with apt", p, unit)
		}
	}
	if strings.Contains(prop(b, "Before"), "cocoonbox-session.service") {
		t.Errorf("%s is ordered Before= the session", unit)
	}
	// A desktop restart (what a restore does): stop, new home content, start.
	b.Must(t, "systemctl", "stop", "cocoonbox-session.service")
	writeList(t, b, "bash\ncoreutils\n")
	b.Must(t, "systemctl", "start", "cocoonbox-session.service")
	waitFor(t, 60*time.Second, "the reconciler to run after the session start", func() bool {
		for _, m := range journal(b, msgNothing) {
			if strings.Contains(m, "all 2 listed packages are installed") {
				return true
			}
		}
		return false
	})
}
