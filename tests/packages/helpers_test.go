//go:build booted

// Package packages_test boots cbdesk boxes and checks the Packages contract
// with real apt against Debian's mirror: one test per "Must show" line of
// the issue, named after it.
package packages_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

const (
	unit     = "cocoonbox-packages.service"
	listPath = "/home/user/.config/cocoonbox/packages"
	helper   = "/usr/local/lib/cocoonbox/packages"
	execLog  = "/run/cbtest-exec.log"
	// MESSAGE_IDs of guest/packages (copied, so a change there that breaks
	// an admin's journal filter fails here).
	msgRefused   = "6e1f7ec9b07c4988882e0763bccb108f"
	msgNothing   = "d53b6796231f47af839c38fbc4119bbb"
	msgInstalled = "1811472c5c544ec7a44ae7a4a5b59229"
	msgFailed    = "f25efdc4fc114dfbb1de9d18211b184c"
	msgLockBusy  = "86e97a8a80c24c4c88c3ad507154353e"
	msgRecorded  = "53fef959a1aa438bbdea335feba94de4"
	msgReplaced  = "7f54047a7ba84fbcaa733c29fa88c4cb"
)

// boot boots a box (box.Boot) and waits until the boot's own reconcile
// has ended: the session pulls it in, and the unit being Type=exec, the
// box is running while that run (the image's home has no list: nothing
// to do) may still go on. A test's own start would otherwise join it (a
// start of an active unit starts nothing) and see the run that read no
// list.
func boot(t testing.TB) *box.Box {
	t.Helper()
	b := box.Boot(t, box.Options{})
	var st string
	box.Eventually(t, time.Minute, "the boot's own reconcile to end", func() (bool, string) {
		st = prop(b, "ActiveState")
		return st == "inactive" || st == "failed", st
	})
	if st == "failed" {
		t.Fatalf("the boot's own reconcile failed (Result=%s ExecMainStatus=%s)", prop(b, "Result"), prop(b, "ExecMainStatus"))
	}
	return b
}

// shorten makes the unit's lock wait and retry spacing a few seconds, with
// a runtime drop-in (the documented way: the unit's Environment= and
// RestartSec=).
func shorten(t *testing.T, b *box.Box) {
	t.Helper()
	b.MustSh(t, "mkdir -p /run/systemd/system/"+unit+".d")
	if err := b.WriteFile("/run/systemd/system/"+unit+".d/50-test.conf",
		[]byte("[Service]\nEnvironment=COCOONBOX_PACKAGES_LOCK_TIMEOUT=3\nRestartSec=2\n"), 0o644, "root"); err != nil {
		t.Fatal(err)
	}
	b.Must(t, "systemctl", "daemon-reload")
}

// writeList gives user a package list, as user would write it.
func writeList(t *testing.T, b *box.Box, content string) {
	t.Helper()
	if _, err := b.RunAs("user", "mkdir", "-p", filepath.Dir(listPath)); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(listPath, []byte(content), 0o644, "user:user"); err != nil {
		t.Fatal(err)
	}
}

// wrapExec puts wrappers for dpkg-query and apt-get first in PATH
// (/usr/local/sbin): each run appends "name args..." to execLog, then execs
// the real program. The unit's PATH starts with /usr/local/sbin.
func wrapExec(t *testing.T, b *box.Box) {
	t.Helper()
	for _, prog := range []string{"dpkg-query", "apt-get"} {
		script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"%s $*\" >>%s\nexec /usr/bin/%s \"$@\"\n", prog, execLog, prog)
		if err := b.WriteFile("/usr/local/sbin/"+prog, []byte(script), 0o755, "root"); err != nil {
			t.Fatal(err)
		}
	}
}

// execs returns the logged runs of prog.
func execs(b *box.Box, prog string) []string {
	data, _ := b.ReadFile(execLog)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, prog+" ") {
			out = append(out, line)
		}
	}
	return out
}

// start starts the unit and waits for its run to end (`systemctl start
// --wait`: the unit is Type=exec, so a plain start returns once the
// reconcile runs); it returns systemctl's exit code: 0 after the
// reconcile's exit 0, 1 after any other end.
func start(t *testing.T, b *box.Box) int {
	t.Helper()
	res, err := b.Exec(box.Cmd{Args: []string{"systemctl", "start", "--wait", unit}, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode
}

func prop(b *box.Box, name string) string {
	out, _ := b.Run("systemctl", "show", "-P", name, unit)
	return strings.TrimSpace(out)
}

func installed(b *box.Box, pkg string) bool {
	out, _ := b.Run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", pkg)
	return strings.HasPrefix(out, "ii")
}

// journal returns the messages of the helper's entries with that MESSAGE_ID.
func journal(b *box.Box, msgID string) []string {
	out, _ := b.Run("journalctl", "-m", "--no-pager", "-o", "cat", "MESSAGE_ID="+msgID)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// aptAsUser runs `sudo apt-get ARGS` as user, as a person in the desktop's
// terminal would, and fails the test when apt fails.
func aptAsUser(t *testing.T, b *box.Box, args ...string) string {
	t.Helper()
	res, err := b.Exec(box.Cmd{User: "user", Args: append([]string{"sudo", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y"}, args...), Timeout: 8 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("sudo apt-get %s as user exited %d:\n%s\n%s", strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// waitFor polls cond every 500 ms until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	box.Eventually(t, timeout, what, func() (bool, string) { return cond(), "not yet" })
}

// buildLockHolder builds ./dpkglock for the box (static) and copies it in.
func buildLockHolder(t *testing.T, b *box.Box) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cbtest-dpkglock")
	cmd := exec.Command("go", "build", "-o", bin, "./dpkglock")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the lock holder: %v\n%s", err, out)
	}
	const inBox = "/usr/local/bin/cbtest-dpkglock"
	if err := b.CopyIn(bin, inBox, 0o755, "root"); err != nil {
		t.Fatal(err)
	}
	return inBox
}
