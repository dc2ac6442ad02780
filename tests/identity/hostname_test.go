//go:build booted

package boxidentity

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// After `identity write`, the kernel hostname, /etc/hostname and
// hostnamectl all show the mapped name (and /etc/hosts resolves it).
func TestHostnameFollowsIdentityWrite(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	mustWrite(t, b, record(t, boxID(1), "first"))
	checkHostname(t, b, "first")
}

// The old one-run-per-write hostname unit's marker is gone (issue 18,
// item 8): identity write leaves nothing in /run/cocoonbox-hostname, the
// path unit has no PathExists= on it, and a write still renames, also
// while the resident service was stopped (the path unit starts it).
func TestNoPendingMarkerAndAStoppedWatchIsStartedByTheWrite(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	mustWrite(t, b, record(t, boxID(1), "marked"))
	checkHostname(t, b, "marked")
	if out, err := b.Sh("ls -A /run/cocoonbox-hostname 2>&1"); err == nil {
		t.Errorf("/run/cocoonbox-hostname exists after a write: %q", out)
	}
	if got := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "Paths", "cocoonbox-hostname.path")); strings.Contains(got, "pending") {
		t.Errorf("cocoonbox-hostname.path still watches the marker: %s", got)
	}
	b.Must(t, "systemctl", "stop", "cocoonbox-hostname.service")
	mustWrite(t, b, record(t, boxID(1), "unmarked"))
	checkHostname(t, b, "unmarked")
}

// The helper sets the hostname itself, not through systemd-hostnamed
// (issue 24, Deliver 9: the boot no longer waits for dbus.service and
// hostnamed's activation before the hostname follows): with the system
// bus down the hostname still follows a write, the static one too.
func TestHostnameFollowsWithTheSystemBusDown(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	b.Must(t, "systemctl", "stop", "dbus.socket", "dbus.service", "systemd-hostnamed.service")
	mustWrite(t, b, record(t, boxID(1), "nobus"))
	waitHostname(t, b, "nobus")
	if got := strings.TrimSpace(b.Must(t, "cat", "/etc/hostname")); got != "nobus" {
		t.Errorf("/etc/hostname = %q, want nobus", got)
	}
	if after := b.Must(t, "systemctl", "show", "-P", "After", "cocoonbox-hostname.service"); strings.Contains(after, "dbus") {
		t.Errorf("cocoonbox-hostname.service still waits for the system bus: After=%s", after)
	}
}

// A second write renames.
func TestSecondWriteRenames(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	mustWrite(t, b, record(t, boxID(1), "before"))
	checkHostname(t, b, "before")
	mustWrite(t, b, record(t, boxID(1), "after"))
	checkHostname(t, b, "after")
	if hosts := b.Must(t, "cat", "/etc/hosts"); strings.Contains(hosts, "before") {
		t.Errorf("/etc/hosts still names the old hostname:\n%s", hosts)
	}
}

// `_` maps to `-`.
func TestUnderscoreMapsToDash(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	mustWrite(t, b, record(t, boxID(1), "my_dev_box"))
	checkHostname(t, b, "my-dev-box")
}

// An empty name gives the box id.
func TestEmptyNameGivesBoxID(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	mustWrite(t, b, record(t, "cb-7e57b0c5", ""))
	checkHostname(t, b, "cb-7e57b0c5")
}

// After a reboot of a box with a persistent root the static name is still
// there (the identity file is on tmpfs and gone; /etc/hostname carries it).
func TestStaticNameSurvivesRebootOfPersistentBox(t *testing.T) {
	t.Parallel()
	// nspawn --template makes the root; the directory must not exist yet.
	b := box.Boot(t, box.Options{Persistent: filepath.Join(t.TempDir(), "root")})
	mustWrite(t, b, record(t, boxID(1), "keeps_name"))
	checkHostname(t, b, "keeps-name")
	if err := b.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Run("test", "-e", "/run/cocoonbox-identity/identity"); err == nil {
		t.Fatal("the identity file survived the reboot: the test would not prove the static name")
	}
	checkHostname(t, b, "keeps-name")
}

// Contract: Box identity. Every hostname the box has resolves, not only the
// one the identity gave it (issue 18, item 5): nspawn's machine name before
// any identity write, and a name an admin set with hostname(1), so sudo
// never prints "unable to resolve host". nss-myhostname answers for them.
func TestAnyHostnameResolves(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	for _, set := range []string{"", "set-by-an-admin"} {
		if set != "" {
			b.Must(t, "hostname", set)
		}
		name := strings.TrimSpace(b.Must(t, "hostname"))
		if out, err := b.Run("getent", "hosts", name); err != nil || strings.TrimSpace(out) == "" {
			t.Errorf("hostname %s does not resolve: getent hosts: %v %q", name, err, out)
		}
		res, err := b.Exec(box.Cmd{Args: []string{"sudo", "-n", "true"}, User: "user"})
		if err != nil || res.ExitCode != 0 || strings.Contains(res.Stderr, "resolve host") {
			t.Errorf("hostname %s: sudo as user: exit %d, stderr %q (%v)", name, res.ExitCode, res.Stderr, err)
		}
	}
	if nss := b.Must(t, "grep", "^hosts:", "/etc/nsswitch.conf"); !strings.Contains(nss, "files myhostname") {
		t.Errorf("nsswitch.conf %q: want myhostname right after files", strings.TrimSpace(nss))
	}
}
