//go:build booted

// Package deb tests the guest set as Debian packages (issue 17): `make deb`'s
// image/deb, lintian's verdict on both packages, and cocoonbox-guest
// installed with apt into a plain Debian 12 root (tests/deb/plain-root, not
// our image), booted through tests/box with every unit up, then purged and
// installed again. The base tier's contract tests are not run again on
// that root: the image is the same package installed with apt (image/build),
// and every booted package holds the image to the contract.
package deb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

const version = "1.0~test"

var (
	debsOnce sync.Once
	debsDir  string
	debsErr  error
)

// TestMain removes the packages debs built (41 MB a run was left in /tmp).
func TestMain(m *testing.M) {
	code := m.Run()
	if debsDir != "" {
		os.RemoveAll(debsDir)
	}
	os.Exit(code)
}

// debs builds both packages once (image/deb, xz as `make deb` does) from
// the helpers of out/bin and returns their directory.
func debs(t *testing.T) (repo, dir string) {
	t.Helper()
	testenv.RequireRoot(t, "dpkg-deb --root-owner-group, apt into a root")
	repo, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	debsOnce.Do(func() {
		debsDir, debsErr = os.MkdirTemp("", "cocoonbox-debs-")
		for _, tier := range []string{"base", "desk"} {
			if debsErr != nil {
				return
			}
			out, err := exec.Command(filepath.Join(repo, "image/deb"), "--tier", tier, "--version", version,
				"--bin", filepath.Join(repo, "out/bin"), "--out", debsDir).CombinedOutput()
			if err != nil {
				debsErr = &cmdError{"image/deb --tier " + tier, err, out}
			}
		}
	})
	if debsErr != nil {
		t.Fatalf("%v (run `make build` first)", debsErr)
	}
	return repo, debsDir
}

type cmdError struct {
	what string
	err  error
	out  []byte
}

func (e *cmdError) Error() string { return e.what + ": " + e.err.Error() + "\n" + string(e.out) }

func guestDeb(dir string) string { return filepath.Join(dir, "cocoonbox-guest_"+version+"_amd64.deb") }
func deskDeb(dir string) string  { return filepath.Join(dir, "cocoonbox-desk_"+version+"_amd64.deb") }

// lintian runs Debian's checker as `make test` holds it: no error, no
// warning (each remaining tag overridden with its reason).
func lintian(t *testing.T, deb string) (string, bool) {
	t.Helper()
	out, err := exec.Command("lintian", "--no-cfg", "--fail-on", "error,warning", deb).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("lintian is missing (make setup installs it): %v", err)
	}
	var tags []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
			tags = append(tags, l)
		}
	}
	return strings.Join(tags, "\n"), err == nil && len(tags) == 0
}

// Deliver 2: lintian passes on both packages with no error and no warning.
func TestLintianPassesOnBothPackages(t *testing.T) {
	_, dir := debs(t)
	for _, deb := range []string{guestDeb(dir), deskDeb(dir)} {
		if tags, ok := lintian(t, deb); !ok {
			t.Errorf("lintian on %s:\n%s", filepath.Base(deb), tags)
		}
	}
}

// Issue 45, Deliver 1: cocoonbox-guest installs the man pages of the
// helpers built on internal/command (branchbox's, one a command), which
// make build generates from the binaries' own help.
func TestGuestPackageInstallsBranchboxsManPages(t *testing.T) {
	_, dir := debs(t)
	out, err := exec.Command("dpkg-deb", "-c", guestDeb(dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, out)
	}
	for _, page := range []string{"branchbox.1.gz", "branchbox-feature.1.gz", "branchbox-feature-check.1.gz", "branchbox-feature-exec.1.gz"} {
		if !strings.Contains(string(out), " ./usr/share/man/man1/"+page+"\n") {
			t.Errorf("cocoonbox-guest has no /usr/share/man/man1/%s (make build writes out/man):\n%s", page, out)
		}
	}
}

// The control case: the same package without its overrides file is
// refused, so the check above can fail.
func TestLintianRefusesThePackageWithoutItsOverrides(t *testing.T) {
	_, dir := debs(t)
	tree := filepath.Join(t.TempDir(), "tree")
	run(t, "dpkg-deb", "-R", guestDeb(dir), tree)
	if err := os.Remove(filepath.Join(tree, "usr/share/lintian/overrides/cocoonbox-guest")); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "cocoonbox-guest_"+version+"_amd64.deb")
	run(t, "dpkg-deb", "--root-owner-group", "-Znone", "-b", tree, bare)
	tags, ok := lintian(t, bare)
	if ok || !strings.Contains(tags, "file-in-usr-local") {
		t.Errorf("lintian without the overrides passed or missed file-in-usr-local:\n%s", tags)
	}
}

// Bad input: a dirty working tree, no git to take a version from, or a
// version Debian refuses fail naming it, before anything is built.
func TestDebRefusesADirtyUnsetOrBadVersion(t *testing.T) {
	repo, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	run(t, "mkdir", "-p", src)
	run(t, "cp", "-a", filepath.Join(repo, "image"), src+"/")
	deb := filepath.Join(src, "image/deb")
	cases := []struct{ name, setup, version, want string }{
		{"unset", "", "", "the version is unset"},
		{"dirty", "git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm t && echo 9 >image/VERSION", "", "the working tree is dirty"},
		{"hyphen", "", "1-2", "version '1-2' is not a Debian version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != "" {
				if out, err := exec.Command("sh", "-c", "cd "+src+" && "+c.setup).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", c.setup, err, out)
				}
			}
			args := []string{"--tier", "base", "--out", t.TempDir()}
			if c.version != "" {
				args = append(args, "--version", c.version)
			}
			out, err := exec.Command(deb, args...).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
				t.Errorf("image/deb %v: %v, want exit 2 saying %q:\n%s", args, err, c.want, out)
			}
		})
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// inRoot runs a shell line inside root (box.InRoot: not booted, an image
// build's view), with the packages at /run/cocoonbox-debs.
func inRoot(root, debs, line string) (string, error) {
	return box.InRoot(root, []string{debs + ":/run/cocoonbox-debs"}, line)
}

// plainRoot copies the cached plain Debian 12 root to a fresh directory.
// The script's answer is its stdout alone: with its stderr too, a cold
// cache gave cp debootstrap's whole log as the path (issue 25).
func plainRoot(t *testing.T, repo string) string {
	t.Helper()
	src := box.Answer(t, nil, "tests/deb/plain-root")
	root := filepath.Join(t.TempDir(), "root")
	run(t, "cp", "-a", "--reflink=auto", src, root)
	return root
}

func status(t *testing.T, root string) string {
	out, _ := exec.Command("dpkg-query", "--admindir="+root+"/var/lib/dpkg", "-W", "-f", "${db:Status-Abbrev}", "cocoonbox-guest").Output()
	return strings.TrimSpace(string(out))
}

// Bad input: on a root without systemd the preinst refuses, saying so, and
// the package is not installed at all (no half-configured state).
func TestInstallOnARootWithoutSystemdIsRefused(t *testing.T) {
	repo, dir := debs(t)
	root := plainRoot(t, repo)
	out, err := inRoot(root, dir, "dpkg -i /run/cocoonbox-debs/"+filepath.Base(guestDeb(dir)))
	if err == nil || !strings.Contains(out, "this root has no systemd") {
		t.Fatalf("dpkg -i on a root without systemd: %v, want the preinst's refusal:\n%s", err, out)
	}
	if st := status(t, root); len(st) < 2 || st[1] != 'n' {
		t.Errorf("after the refusal cocoonbox-guest's status is %q, want not-installed", st)
	}
}
