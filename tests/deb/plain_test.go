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
// Debian 12 root, booted under nspawn, passes the base tier's contract tests
// (identity, hostname, vault, packages, polkit, paths); a purge leaves none
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

	t.Run("ContractTests", func(t *testing.T) {
		cmd := exec.Command("go", "test", "-count=1", "-timeout", "20m",
			"./tests/contract/", "./tests/identity/", "./tests/vault/", "./tests/packages/")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), box.ImageEnv+"="+root)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the base tier's contract tests on the package in a plain root: %v\n%s", err, out)
		}
		t.Logf("%s", out)
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
