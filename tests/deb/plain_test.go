//go:build booted

package deb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// ours lists what of ours systemd would start in root: unit files and
// enablement links (system and user) naming cocoonbox.
func ours(root string) []string {
	var found []string
	for _, pattern := range []string{
		"usr/lib/systemd/system/cocoonbox-*", "usr/lib/systemd/user/cocoonbox-*",
		"etc/systemd/system/*/cocoonbox-*", "etc/systemd/user/*/cocoonbox-*",
		"etc/systemd/system/*/run-cocoonbox*", "usr/lib/systemd/system/run-cocoonbox*",
	} {
		m, _ := filepath.Glob(filepath.Join(root, pattern))
		found = append(found, m...)
	}
	return found
}

// Must show: cocoonbox-guest installed with apt-get into a plain debootstrap
// Debian 12 root (its Depends and Recommends from the mirror, its
// maintainer scripts on a root we did not make) boots through tests/box
// with no unit failed and ours up (bootsClean); a purge leaves none
// of our units and nothing of ours enabled and /home/user untouched; install,
// remove, install again works.
func TestPackageInPlainDebian(t *testing.T) {
	repo, dir := debs(t)
	root := plainRoot(t, repo)
	deb := "/run/cocoonbox-debs/" + filepath.Base(guestDeb(dir))
	// With its Recommends, as apt installs by default (what a builder gets).
	install := "apt-get install -y -q " + deb
	start := time.Now()
	if out, err := inRoot(root, dir, "apt-get update -q && "+install); err != nil {
		t.Fatalf("apt-get install ./cocoonbox-guest into a plain root: %v\n%s", err, out)
	}
	t.Logf("install into a fresh root (apt-get update and the dependencies included): %v", time.Since(start))
	if st := status(t, root); st != "ii" {
		t.Fatalf("cocoonbox-guest's status is %q, want ii", st)
	}
	// box.Start boots only what names itself an image.
	stamp := "cbdesk:plain-debian+cocoonbox-guest " + version + "\ntier=base\nrevision=test\n"
	if err := os.WriteFile(filepath.Join(root, "etc/cocoonbox/image"), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("Boots", func(t *testing.T) {
		bootsClean(t, root)
	})

	marker := filepath.Join(root, "home/user/keep-me")
	if err := os.WriteFile(marker, []byte("the user's data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := inRoot(root, dir, "apt-get purge -y -q cocoonbox-guest"); err != nil {
		t.Fatalf("apt-get purge: %v\n%s", err, out)
	}
	if left := ours(root); len(left) > 0 {
		t.Errorf("after the purge these of ours are left:\n%s", strings.Join(left, "\n"))
	}
	if st := status(t, root); st != "" && st[1] != 'n' {
		t.Errorf("after the purge the status is %q, want not-installed", st)
	}
	if data, err := os.ReadFile(marker); err != nil || string(data) != "the user's data\n" {
		t.Errorf("the purge touched /home/user: %q, %v", data, err)
	}
	if out, err := exec.Command("chroot", root, "getent", "passwd", "user").Output(); err != nil || !strings.HasPrefix(string(out), "user:x:1000:") {
		t.Errorf("the purge removed the user: %q, %v", out, err)
	}

	// Install, remove, install again.
	for _, step := range []string{install, "apt-get remove -y -q cocoonbox-guest", install} {
		if out, err := inRoot(root, dir, step); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
	}
	enabled := filepath.Join(root, "etc/systemd/system/paths.target.wants/cocoonbox-vault.path")
	if _, err := os.Lstat(enabled); err != nil || status(t, root) != "ii" {
		t.Errorf("after install, remove, install: status %q, cocoonbox-vault.path enabled: %v", status(t, root), err)
	}
}

// bootsClean boots root (box.Boot: a throwaway overlay, root itself stays
// as it is) and checks what only a root we did not build can break: the
// system comes up `running` with no unit failed, and every unit of ours
// the package enabled is active. What the units do is the base tier's
// contract, held on the image by tests/contract, identity, vault and
// packages; the image installs this same package with apt.
func bootsClean(t *testing.T, root string) {
	b := box.Boot(t, box.Options{Image: root})
	if failed, err := b.FailedUnits(); err != nil || len(failed) > 0 {
		t.Fatalf("the plain root with cocoonbox-guest booted with failed units %v (%v)", failed, err)
	}
	if state, err := b.Run("systemctl", "is-system-running"); strings.TrimSpace(state) != "running" {
		t.Errorf("systemctl is-system-running: %q, %v; want running", state, err)
	}
	var enabled []string
	for _, link := range ours(root) {
		if strings.HasPrefix(link, filepath.Join(root, "etc/systemd/system")+"/") && strings.HasSuffix(filepath.Dir(link), ".wants") {
			enabled = append(enabled, filepath.Base(link))
		}
	}
	if len(enabled) == 0 {
		t.Fatalf("the package enabled no unit of ours in the root:\n%s", strings.Join(ours(root), "\n"))
	}
	for _, unit := range enabled {
		// A oneshot service has run and ended (Result success); a path,
		// a mount or a long-running service is active.
		active, result := b.Property(unit, "ActiveState"), b.Property(unit, "Result")
		oneshot := strings.HasSuffix(unit, ".service") && b.Property(unit, "Type") == "oneshot"
		if result != "success" || (active != "active" && !(oneshot && active == "inactive")) {
			t.Errorf("%s after boot: ActiveState %q, Result %q; want active, or a oneshot's success", unit, active, result)
		}
	}
	t.Logf("booted in %v; active: %s", b.Booted, strings.Join(enabled, " "))
}
