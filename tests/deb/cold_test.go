//go:build booted

package deb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// standInDebootstrap puts a debootstrap on PATH that makes a tiny root (no
// download: a cold cache's path through the script in a second, not the
// minutes of a real minbase) and talks on both streams, as the real one's
// progress does; each call is counted in calls.
func standInDebootstrap(t *testing.T) (env []string, calls string) {
	bin := t.TempDir()
	calls = filepath.Join(t.TempDir(), "calls")
	box.StandIn(t, bin, "debootstrap", `echo "debootstrap $*" >>`+calls+`
for a; do suite=$target; target=$mirror; mirror=$a; done # the last three: suite, target, mirror
echo "I: Retrieving InRelease"; echo "I: Validating Packages" >&2
mkdir -p "$target/etc/apt" "$target/var/cache/apt/archives" "$target/var/lib/apt/lists"
echo stale >"$target/var/cache/apt/archives/x.deb"; echo "I: Base system installed successfully."`)
	return []string{"COCOONBOX_CACHE=" + t.TempDir(), box.PathFirst(bin), "DEBIAN_MIRROR=http://127.0.0.1:9/debian"}, calls
}

// Deliver 1 of issue 25: tests/deb/plain-root on a cold cache of the
// test's own answers the root's path alone on stdout (debootstrap's
// progress on stderr), builds the root once, and the next call takes it
// from the cache. TestInstallOnARootWithoutSystemdIsRefused failed on a
// fresh machine because the test read both streams as the path.
func TestPlainRootOnAColdCacheAnswersOnlyItsPath(t *testing.T) {
	env, calls := standInDebootstrap(t)
	cache := strings.TrimPrefix(env[0], "COCOONBOX_CACHE=")
	root := box.Answer(t, env, "tests/deb/plain-root")
	if filepath.Dir(root) != filepath.Join(cache, "plain") || !strings.HasPrefix(filepath.Base(root), "bookworm-") {
		t.Fatalf("plain-root answered %q, want a root under %s/plain", root, cache)
	}
	if _, err := os.Stat(filepath.Join(root, ".cocoonbox-plain")); err != nil {
		t.Errorf("the root has no completion marker: %v", err)
	}
	if src, _ := os.ReadFile(filepath.Join(root, "etc/apt/sources.list")); string(src) != "deb http://127.0.0.1:9/debian bookworm main\n" {
		t.Errorf("sources.list is %q", src)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb")); len(left) != 0 {
		t.Errorf("the cached root keeps downloaded packages: %v", left)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "plain")); len(entries) != 1 {
		t.Errorf("the cache holds %d entries, want the root alone (no temporary left)", len(entries))
	}
	// Warm: the same path, and debootstrap is not run again.
	if again := box.Answer(t, env, "tests/deb/plain-root"); again != root {
		t.Errorf("the warm call answered %q, the cold one %q", again, root)
	}
	if n, _ := os.ReadFile(calls); strings.Count(string(n), "\n") != 1 {
		t.Errorf("debootstrap ran %d times for a cold then a warm call, want once:\n%s", strings.Count(string(n), "\n"), n)
	}
}
