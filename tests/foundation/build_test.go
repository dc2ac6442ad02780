//go:build booted

package foundation

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// runScript runs one of the image scripts with extra environment and
// returns its combined output and exit code.
func runScript(t *testing.T, env []string, script string, args ...string) (string, int) {
	t.Helper()
	root, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, script), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("%s: %v", script, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestImageBuildRefusesABadVersionNamingTheAllowedValues(t *testing.T) {
	out, code := runScript(t, nil, "image/build", "--version", "abc", "--out", t.TempDir())
	if code != 2 || !strings.Contains(out, "VERSION='abc'") || !strings.Contains(out, "whole numbers from 1") {
		t.Fatalf("exit %d, output %q: want exit 2 naming VERSION='abc' and the allowed values", code, out)
	}
}

func TestImageBuildRefusesAnUnknownTierNamingTheAllowedValues(t *testing.T) {
	out, code := runScript(t, nil, "image/build", "--tier", "nope", "--out", t.TempDir())
	if code != 2 || !strings.Contains(out, "TIER='nope'") || !strings.Contains(out, "base") {
		t.Fatalf("exit %d, output %q: want exit 2 naming TIER='nope' and the allowed tiers", code, out)
	}
}

// Bug this names: the Makefile pasted VERSION into the shell line in single
// quotes, so `make image VERSION="1'; cmd; : '"` ran cmd. The value must
// be refused as a value, and nothing in it run.
func TestMakeImageRefusesAQuotedVersionWithoutRunningIt(t *testing.T) {
	root, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(t.TempDir(), "canary")
	// build too: it links VERSION into the binaries as their release.
	for _, target := range []string{"check-image", "check-desk-image", "build"} {
		cmd := exec.Command("make", "--no-print-directory", "-C", root, target,
			"VERSION=1'; touch "+canary+"; : '", "TIER=base")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), "is not an image version") {
			t.Errorf("make %s: exit %d, output %q: want the VERSION refused", target, code, out)
		}
		if _, err := os.Stat(canary); err == nil {
			t.Fatalf("make %s ran the command inside VERSION", target)
		}
	}
}

// A PATH without rsync: provision names the tool and its Debian package.
func TestAMissingHostToolIsNamedWithItsDebianPackage(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"bash", "dirname", "sed", "grep", "paste", "cat", "id"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	out, code := runScript(t, []string{"PATH=" + bin}, "image/provision", t.TempDir())
	if code == 0 || !strings.Contains(out, "'rsync' is missing") || !strings.Contains(out, "apt-get install rsync") {
		t.Fatalf("exit %d, output %q: want a failure naming rsync and its package", code, out)
	}
}

// A provision that fails after the layer was copied leaves nothing under
// the output directory that a later build would take for an image.
func TestAFailedProvisionLeavesNoImageBehind(t *testing.T) {
	if err := box.CanBoot(); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	out := t.TempDir()
	log, code := runScript(t, nil, "image/build", "--bin", filepath.Join(t.TempDir(), "missing"), "--out", out, "--rev", "test")
	if code == 0 {
		t.Fatalf("build with a missing --bin succeeded:\n%s", log)
	}
	if !strings.Contains(log, "make build") {
		t.Errorf("the error does not say how to get the binaries: %q", log)
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Fatalf("a failed build left %v under %s", names(left), out)
	}
}

// A debootstrap that fails midway (here: its mirror refuses connections)
// leaves no layer in the cache, and no temporary one either.
func TestAFailedDebootstrapLeavesNoLayerInTheCache(t *testing.T) {
	if err := box.CanBoot(); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	cache := t.TempDir()
	log, code := runScript(t, []string{"COCOONBOX_CACHE=" + cache, "DEBIAN_MIRROR=http://127.0.0.1:9/debian"}, "image/layer", "base")
	if code == 0 {
		t.Fatalf("image/layer with an unreachable mirror succeeded:\n%s", log)
	}
	left, _ := os.ReadDir(filepath.Join(cache, "layers"))
	if len(left) != 0 {
		t.Fatalf("a failed debootstrap left %v in the cache", names(left))
	}
}

func names(entries []os.DirEntry) []string {
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}

// Every directory image/stage copies from the repository (for the
// packages and image/provision) exists, unless its line says "# optional"
// (issue 18, item 8: provision copied an image/rootfs that never existed).
func TestStageCopiesOnlySourcesThatExist(t *testing.T) {
	root, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "image/stage"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "copy" || strings.Contains(line, "# optional") {
			continue
		}
		src := strings.Trim(f[1], `"`)
		src = strings.NewReplacer("$REPO/", "", "$IMAGE_DIR/", "image/").Replace(src)
		if strings.Contains(src, "$") {
			continue // a tier's own directory: optional by the tier's rules
		}
		n++
		if fi, err := os.Stat(filepath.Join(root, src)); err != nil || !fi.IsDir() {
			t.Errorf("image/stage copies %s, which is no directory of the repository (%v)", src, err)
		}
	}
	if n == 0 {
		t.Fatal("found no copy line in image/stage: the test reads it wrong")
	}
}
