//go:build booted

package desk

import (
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Box identity (the X cookie). xauthority-init runs as root and
// user owns /run/cocoonbox-x, so user can put a symlink at any name there.
// Before issue 18's fix (item 3) root made its temporary file in that
// directory and chowned and chmodded it by name: a symlink swapped in made
// root hand another file to user. Here user swaps every file root makes
// there for a symlink to a root-only file while xauthority-init runs 200
// times; that file must stay root:root 0600, and the cookie root:user 0640.
func TestXauthorityInitFollowsNoSymlinkOfTheUser(t *testing.T) {
	b := bootDesk(t)
	const victim = "/etc/cocoonbox-victim"
	b.MustSh(t, "install -m 0600 -o root -g root /dev/null "+victim)
	swap := `while [ ! -e /tmp/swap-stop ]; do for f in /run/cocoonbox-x/.* /run/cocoonbox-x/*-?; do ` +
		`case $f in */.|*/..) continue;; esac; [ -L "$f" ] || ln -sfn ` + victim + ` "$f" 2>/dev/null; done; done; touch /tmp/swap-done`
	b.Must(t, "runuser", "-u", "user", "--", "setsid", "-f", "sh", "-c", swap)
	// The control: the swapper does replace a file root makes there.
	b.MustSh(t, "touch /run/cocoonbox-x/.probe")
	box.Eventually(t, 2*time.Minute, "user's loop swaps a file of root's for a symlink", func() (bool, string) {
		out, _ := b.Sh("readlink /run/cocoonbox-x/.probe")
		return strings.TrimSpace(out) == victim, out
	})
	b.MustSh(t, "for i in $(seq 200); do /usr/local/lib/cocoonbox/xauthority-init 2>/dev/null; done; touch /tmp/swap-stop")
	box.Eventually(t, 2*time.Minute, "user's loop ends", func() (bool, string) {
		_, err := b.Run("test", "-e", "/tmp/swap-done")
		return err == nil, "no /tmp/swap-done"
	})
	if got := strings.TrimSpace(b.MustSh(t, "stat -c '%U:%G %a' "+victim)); got != "root:root 600" {
		t.Errorf("%s is %s after xauthority-init ran beside user's symlinks: root followed one", victim, got)
	}
	b.MustSh(t, "rm -f /run/cocoonbox-x/.probe")
	b.MustSh(t, "/usr/local/lib/cocoonbox/xauthority-init")
	if got := strings.TrimSpace(b.MustSh(t, "stat -c '%F %U:%G %a' /run/cocoonbox-x/Xauthority")); got != "regular file root:user 640" {
		t.Errorf("the cookie is %q, want a regular file root:user 640", got)
	}
}

// Contract: Box identity (the X cookie); issue 24, Deliver 9. The cookie
// is made by xauthority-init alone, one process on the boot's path: with
// no xauth in the box, Xorg still starts, with a new cookie that lets user
// in. The shell script it replaces ran xauth (and about nine other
// processes) before every Xorg start, and failed here.
func TestXCookieIsMadeWithNoXauthInTheBox(t *testing.T) {
	b := bootDesk(t)
	before := b.MustSh(t, "od -An -tx1 /run/cocoonbox-x/Xauthority")
	restartXorgWithout(t, b, "/usr/bin/xauth")
	if after := b.MustSh(t, "od -An -tx1 /run/cocoonbox-x/Xauthority"); after == before {
		t.Errorf("the cookie did not change at Xorg's restart")
	}
	nlist := strings.TrimSpace(b.Must(t, "xauth", "-f", "/run/cocoonbox-x/Xauthority", "nlist"))
	if lines := strings.Split(nlist, "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "ffff 0000  0001 30 0012 ") {
		t.Errorf("Xauthority entries %q: want one FamilyWild (ffff) entry for display 0", nlist)
	}
	if got := strings.TrimSpace(b.MustSh(t, "stat -c '%F %U:%G %a' /run/cocoonbox-x/Xauthority")); got != "regular file root:user 640" {
		t.Errorf("the cookie is %q, want a regular file root:user 640", got)
	}
	mustUser(t, b, "xwininfo -root >/dev/null")
	waitDesktop(t, b)
}
