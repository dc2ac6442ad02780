//go:build booted

package desk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

const (
	sessionUnit = "/usr/lib/systemd/system/cocoonbox-session.service"
	// Where cocoonbox-desk's preinst moves the base tier's stand-in
	// (image/debian/desk.diverts).
	standInDiverted = sessionUnit + ".cocoonbox-guest"
)

// The desk tier's units come in its package (issue 17, item 4): the XFCE
// session replaces the base tier's stand-in at the same path by a dpkg
// diversion. Removing cocoonbox-desk gives the stand-in back (the unit
// systemd loads, still enabled); installing it again replaces it again,
// and the desktop starts from it.
func TestDeskPackageReplacesTheSessionStandInAndGivesItBackWhenRemoved(t *testing.T) {
	repo, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The two session units as the repository has them: base's, desk's.
	var units [2][]byte
	for i, tier := range []string{"", "desk/"} {
		if units[i], err = os.ReadFile(filepath.Join(repo, "units", tier+"system/cocoonbox-session.service")); err != nil {
			t.Fatal(err)
		}
	}
	standIn, desk := units[0], units[1]
	b := bootDesk(t)

	replaced := func(when string) {
		t.Helper()
		if got := strings.TrimSpace(b.Must(t, "dpkg-divert", "--listpackage", sessionUnit)); got != "cocoonbox-desk" {
			t.Errorf("%s: %s is diverted by %q, want cocoonbox-desk", when, sessionUnit, got)
		}
		if got, err := b.ReadFile(sessionUnit); err != nil || string(got) != string(desk) {
			t.Errorf("%s: %s is not units/desk/system/cocoonbox-session.service (%v)", when, sessionUnit, err)
		}
		if got, err := b.ReadFile(standInDiverted); err != nil || string(got) != string(standIn) {
			t.Errorf("%s: the stand-in is not kept at %s (%v)", when, standInDiverted, err)
		}
		if !strings.Contains(b.Must(t, "dpkg-query", "-L", "cocoonbox-desk"), "\n"+sessionUnit+"\n") {
			t.Errorf("%s: cocoonbox-desk does not list %s among its files", when, sessionUnit)
		}
	}
	replaced("as built")

	b.Must(t, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y", "-q", "cocoonbox-desk")
	if got := strings.TrimSpace(b.Must(t, "dpkg-divert", "--listpackage", sessionUnit)); got != "" {
		t.Errorf("after removing cocoonbox-desk, %s is still diverted by %q", sessionUnit, got)
	}
	if got, err := b.ReadFile(sessionUnit); err != nil || string(got) != string(standIn) {
		t.Errorf("after removing cocoonbox-desk, %s is not the stand-in (%v):\n%s", sessionUnit, err, got)
	}
	if out, _ := b.Run("ls", "-A", filepath.Dir(sessionUnit)); strings.Contains(out, filepath.Base(standInDiverted)) {
		t.Errorf("after removing cocoonbox-desk, %s is left behind", standInDiverted)
	}
	if got := b.Must(t, "systemctl", "show", "-P", "ExecStart", "cocoonbox-session.service"); !strings.Contains(got, "/bin/sleep infinity") {
		t.Errorf("after removing cocoonbox-desk, systemd runs %s for the session, not the stand-in", got)
	}
	if got, _ := b.Run("systemctl", "is-enabled", "cocoonbox-session.service"); strings.TrimSpace(got) != "enabled" {
		t.Errorf("after removing cocoonbox-desk, cocoonbox-session.service is %q, want enabled", strings.TrimSpace(got))
	}

	// The same package again, at the version of the cocoonbox-guest it
	// depends on exactly.
	version := strings.TrimSpace(b.Must(t, "dpkg-query", "-W", "-f", "${Version}", "cocoonbox-guest"))
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(repo, "image/deb"), "--tier", "desk", "--version", version,
		"--bin", filepath.Join(repo, "out/bin"), "--out", dir, "--compress", "none")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("image/deb --tier desk --version %s: %v\n%s", version, err, stderr.String())
	}
	deb := strings.TrimSpace(string(out))
	if err := b.CopyIn(deb, "/var/tmp/cocoonbox-desk.deb", 0o644, "root"); err != nil {
		t.Fatal(err)
	}
	b.Must(t, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "--no-install-recommends", "/var/tmp/cocoonbox-desk.deb")
	replaced("installed again")
	b.Must(t, "systemctl", "restart", "cocoonbox-session.service")
	waitDesktop(t, b)
}
