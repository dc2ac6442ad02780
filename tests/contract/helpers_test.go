//go:build booted

// Package contract holds the booted-box tests of the image contract
// (issue 6): every static line of "Guest (image) ↔ agent" in the spec is
// checked in a booted box by its own test, named after the line, and the
// provision step is shown to be idempotent and to refuse a root that lacks
// a package.
package contract

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// session is the unit cbagent may start, stop and restart (Contract:
// Desktop restart).
const session = "cocoonbox-session.service"

// stat returns "MODE OWNER:GROUP TYPE" of a path in the box, MODE in octal
// with the setgid bit (2750).
func stat(t *testing.T, b *box.Box, path string) string {
	t.Helper()
	return strings.TrimSpace(b.Must(t, "stat", "-c", "%a %U:%G %F", path))
}

// wantStat fails the test unless path has mode, owner and type.
func wantStat(t *testing.T, b *box.Box, path, want string) {
	t.Helper()
	if got := stat(t, b, path); got != want {
		t.Errorf("%s: %q, want %q", path, got, want)
	}
}

// systemctlAs runs systemctl as a user in the box; a non-zero exit is not
// an error here (the caller decides).
func systemctlAs(t *testing.T, b *box.Box, user string, args ...string) box.Result {
	t.Helper()
	res, err := b.Exec(box.Cmd{User: user, Args: append([]string{"systemctl"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// mustAllow runs systemctl as user and fails the test unless it succeeds.
func mustAllow(t *testing.T, b *box.Box, user string, args ...string) {
	t.Helper()
	if res := systemctlAs(t, b, user, args...); res.ExitCode != 0 {
		t.Errorf("as %s: systemctl %s: exit %d, want success: %s", user, strings.Join(args, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
}

// mustRefuse runs systemctl as user and fails the test unless polkit
// refused it: "Access denied" (a rule said no) or "Interactive
// authentication required" (polkit wanted an admin, and there is none).
// Any other failure (a typo, a unit that cannot reload) would prove
// nothing about polkit and fails the test too.
func mustRefuse(t *testing.T, b *box.Box, user string, args ...string) {
	t.Helper()
	res := systemctlAs(t, b, user, args...)
	refused := strings.Contains(res.Stderr, "Access denied") ||
		strings.Contains(res.Stderr, "Interactive authentication required")
	if res.ExitCode == 0 || !refused {
		t.Errorf("as %s: systemctl %s: exit %d, stderr %q; want a polkit refusal",
			user, strings.Join(args, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
}

// show reads one property of a unit.
func show(t *testing.T, b *box.Box, unit, prop string) string {
	t.Helper()
	return strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", prop, unit))
}

// groupIDs returns the numeric group ids of a user in the box.
func groupIDs(t *testing.T, b *box.Box, user string) []int {
	t.Helper()
	var ids []int
	for _, f := range strings.Fields(b.Must(t, "id", "-G", user)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("id -G %s: %q is not a number", user, f)
		}
		ids = append(ids, n)
	}
	return ids
}

// userManager is systemctl --user with the environment user needs to reach user's own
// systemd manager (user@1000, started by the session).
func userManager(args ...string) []string {
	return append([]string{"env", "XDG_RUNTIME_DIR=/run/user/1000",
		"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus", "systemctl", "--user"}, args...)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("%q is not a number: %v", s, err)
	}
	return n
}
