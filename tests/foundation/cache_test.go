//go:build booted

package foundation

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Issue 25, Deliver 1: every cache the suite fills has its cold path run
// by a test of its own, in a cache directory of the test's own
// (COCOONBOX_CACHE), whatever the shared cache holds: a warm machine
// never takes that path, so a fault there showed only on a fresh one. The
// slow tool each path calls (debootstrap, apt-get, npm) is a stand-in;
// the script's own logic (key, temporary, marker, rename, the answer on
// stdout alone) runs for real.

// calls reads a stand-in's call log: one line per call.
func calls(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")[:strings.Count(string(data), "\n")]
}

// layerStandIns puts a debootstrap on PATH that makes a tiny root which
// systemd-nspawn can run (busybox as sh, an apt-get that records its
// arguments in the root's /var/lib/stand-in-apt), so image/layer's base
// and tier builds both run, in a second each.
func layerStandIns(t *testing.T) (env []string, log string) {
	t.Helper()
	if err := box.CanBoot(); err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		testenv.SkipOrFail(t, "busybox is missing (make setup installs busybox-static)")
	}
	bin := t.TempDir()
	log = filepath.Join(t.TempDir(), "calls")
	box.StandIn(t, bin, "debootstrap", `echo "debootstrap $*" >>`+log+`
for a; do suite=$target; target=$mirror; mirror=$a; done # the last three: suite, target, mirror
echo "I: Retrieving InRelease"; echo "I: Validating Packages" >&2
mkdir -p "$target/usr/bin" "$target/etc/apt" "$target/var/lib/apt/lists" "$target/var/cache/apt/archives" "$target/var/log/apt"
cp `+busybox+` "$target/usr/bin/busybox" && ln -s busybox "$target/usr/bin/sh" && ln -s usr/bin "$target/bin"
printf '#!/usr/bin/sh\necho "Reading package lists..."\necho "$*" >>/var/lib/stand-in-apt\n' >"$target/usr/bin/apt-get"
chmod 0755 "$target/usr/bin/apt-get"; echo stale >"$target/var/cache/apt/archives/x.deb"`)
	return []string{"COCOONBOX_CACHE=" + t.TempDir(), box.PathFirst(bin), "DEBIAN_MIRROR=http://127.0.0.1:9/debian"}, log
}

// image/layer on a cold cache: the base layer from debootstrap, the desk
// tier from it through apt-get under systemd-nspawn, each answered as its
// path alone and marked complete; warm calls build nothing.
func TestLayerColdCacheBuildsEachTierOnceAndAnswersOnlyItsPath(t *testing.T) {
	env, log := layerStandIns(t)
	cache := strings.TrimPrefix(env[0], "COCOONBOX_CACHE=")
	base := box.Answer(t, env, "image/layer", "base")
	desk := box.Answer(t, env, "image/layer", "desk")
	for tier, layer := range map[string]string{"base": base, "desk": desk} {
		if filepath.Dir(layer) != filepath.Join(cache, "layers") || !strings.HasPrefix(filepath.Base(layer), tier+"-") {
			t.Errorf("image/layer %s answered %q, want a layer under %s/layers", tier, layer, cache)
		}
		if marker, err := os.ReadFile(filepath.Join(layer, ".cocoonbox-layer")); err != nil || !strings.HasPrefix(string(marker), "tier="+tier+" ") {
			t.Errorf("layer %s: marker %q, %v", tier, marker, err)
		}
		if left, _ := filepath.Glob(filepath.Join(layer, "var/cache/apt/archives/*.deb")); len(left) != 0 {
			t.Errorf("layer %s keeps downloaded packages: %v", tier, left)
		}
	}
	if src, _ := os.ReadFile(filepath.Join(base, "etc/apt/sources.list")); !strings.Contains(string(src), "deb http://127.0.0.1:9/debian bookworm main\n") {
		t.Errorf("the base layer's sources.list is %q", src)
	}
	apt, _ := os.ReadFile(filepath.Join(desk, "var/lib/stand-in-apt"))
	if lines := strings.Split(strings.TrimSpace(string(apt)), "\n"); len(lines) != 2 || lines[0] != "update -q" ||
		!strings.HasPrefix(lines[1], "install -y -q --no-install-recommends ") || !strings.Contains(lines[1], " xfce4-session") {
		t.Errorf("the desk tier ran apt-get as %q, want update, then install of the tier's packages", apt)
	}
	// Warm: the same paths, and nothing built again.
	if again := box.Answer(t, env, "image/layer", "desk"); again != desk {
		t.Errorf("the warm desk layer is %q, the cold one %q", again, desk)
	}
	if again := box.Answer(t, env, "image/layer", "base"); again != base {
		t.Errorf("the warm base layer is %q, the cold one %q", again, base)
	}
	if c := calls(t, log); len(c) != 1 || !strings.Contains(c[0], "--variant=minbase") {
		t.Errorf("debootstrap ran %q for cold and warm calls of two tiers, want once", c)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "layers")); len(entries) != 2 {
		t.Errorf("the cache holds %d entries, want the two layers alone (no temporary left)", len(entries))
	}
}

// image/npm-fetch on a cold cache fetches the tarball once with npm pack
// (whose own stdout, the file's name, is not the answer), answers its path
// alone, and refuses a tarball whose sha256 is not the pinned one, with
// nothing on stdout.
func TestNpmFetchColdCacheFetchesOnceAndChecksTheSum(t *testing.T) {
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	box.StandIn(t, bin, "npm", `echo "npm $*" >>`+log+`
[ "$1 $2" = "pack --silent" ] || exit 64
file=$(printf '%s' "${3%@*}" | sed 's|^@||; s|/|-|')-${3##*@}.tgz
printf 'tarball of %s' "$3" >"$file"; echo "$file"`)
	cache := t.TempDir()
	env := []string{"COCOONBOX_CACHE=" + cache, box.PathFirst(bin)}
	sum := sha256.Sum256([]byte("tarball of @scope/tiny@1.2.3"))
	pinned := hex.EncodeToString(sum[:])
	got := box.Answer(t, env, "image/npm-fetch", "@scope/tiny", "1.2.3", pinned)
	if want := filepath.Join(cache, "npm/scope-tiny-1.2.3.tgz"); got != want {
		t.Fatalf("npm-fetch answered %q, want %q", got, want)
	}
	if again := box.Answer(t, env, "image/npm-fetch", "@scope/tiny", "1.2.3", pinned); again != got {
		t.Errorf("the warm call answered %q", again)
	}
	if c := calls(t, log); len(c) != 1 {
		t.Errorf("npm ran %q for a cold and a warm call, want once", c)
	}
	// The control: a sum that is not the file's is refused.
	root, _ := box.RepoRoot()
	cmd := exec.Command(filepath.Join(root, "image/npm-fetch"), "@scope/tiny", "1.2.3", strings.Repeat("0", 64))
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil || len(out) != 0 || !strings.Contains(stderr.String(), "does not have the pinned sha256") {
		t.Errorf("a wrong pinned sum: %v, stdout %q, stderr %q; want a refusal on stderr alone", err, out, stderr.String())
	}
}

// tests/setup-host on a cold cache of the test's own: the two npm caches
// (the real claude and codex CLIs, the Dev Containers CLI; npm a stand-in,
// the registry is not the test's to reach) and Docker Compose, built for
// real with the Go toolchain from the module and build caches make setup
// filled (GOPROXY=off: no download), all on stderr; the plugin link goes
// into the test's own $HOME. A second run is idle: the script is safe to
// run again.
func TestSetupHostColdCacheFillsNpmAndComposeOnce(t *testing.T) {
	testenv.RequireRoot(t, "tests/setup-host")
	// Its other steps (apt, mise) are the machine's, done by make setup:
	// with mise missing it would install the stand-in npm's tarball.
	if _, err := os.Stat("/usr/local/bin/mise"); err != nil {
		testenv.SkipOrFail(t, "tests/setup-host has not run on this machine (no /usr/local/bin/mise): run make setup first")
	}
	gocmd := func(args ...string) string {
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	box.StandIn(t, bin, "npm", `echo "npm $*" >>`+log+`
[ "$1" = install ] || exit 64
prefix=; for a; do [ "$prev" = --prefix ] && prefix=$a; prev=$a; done
mkdir -p "$prefix/node_modules/.bin"
for a; do case $a in
@anthropic-ai/claude-code@*) b=claude ;; @openai/codex@*) b=codex ;; @devcontainers/cli@*) b=devcontainer ;;
@modelcontextprotocol/server-everything@*) b=mcp-server-everything ;;
@modelcontextprotocol/sdk@*) mkdir -p "$prefix/node_modules/@modelcontextprotocol/sdk"; echo '{}' >"$prefix/node_modules/@modelcontextprotocol/sdk/package.json"; continue ;;
*) continue ;;
esac; printf '#!/bin/sh\necho %s\n' "$a" >"$prefix/node_modules/.bin/$b"; chmod 0755 "$prefix/node_modules/.bin/$b"; done
echo "added 1 package in 1s"`)
	cache, home := t.TempDir(), t.TempDir()
	env := []string{"COCOONBOX_CACHE=" + cache, "HOME=" + home, box.PathFirst(bin), "GOPROXY=off", "GOFLAGS=",
		"GOCACHE=" + gocmd("env", "GOCACHE"), "GOMODCACHE=" + gocmd("env", "GOMODCACHE"), "GOPATH=" + gocmd("env", "GOPATH")}
	root, _ := box.RepoRoot()
	setup := func() {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "tests/setup-host"))
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tests/setup-host: %v\n%s", err, stderr.String())
		}
		if len(out) != 0 {
			t.Fatalf("tests/setup-host wrote %q on stdout: its progress belongs on stderr", out)
		}
	}
	setup()
	for _, f := range []string{"npm/clis-2.1.197-0.171.0/node_modules/.bin/claude", "npm/clis-2.1.197-0.171.0/node_modules/.bin/codex",
		"npm/devcontainers-cli-0.89.0/node_modules/.bin/devcontainer", "docker-compose-v2.40.3/docker-compose",
		"npm/server-everything-2026.8.31/node_modules/.bin/mcp-server-everything"} {
		if fi, err := os.Stat(filepath.Join(cache, f)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("after setup-host on a cold cache %s is not an executable: %v", f, err)
		}
	}
	compose := filepath.Join(cache, "docker-compose-v2.40.3/docker-compose")
	if link, err := os.Readlink(filepath.Join(home, ".docker/cli-plugins/docker-compose")); err != nil || link != compose {
		t.Errorf("the compose plugin link is %q (%v), want %s", link, err, compose)
	}
	if out, err := exec.Command(compose, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), "v2.40.3") {
		t.Errorf("the built compose: %v, %q", err, out)
	}
	built, _ := os.Stat(compose)
	if left, _ := filepath.Glob(filepath.Join(cache, "*/*.tmp")); len(left) != 0 {
		t.Errorf("temporaries left in the cache: %v", left)
	}
	// Again: nothing to do.
	setup()
	if c := calls(t, log); len(c) != 4 {
		t.Errorf("npm ran %d times over a cold and a warm setup, want four times (once per cache):\n%s", len(c), strings.Join(c, "\n"))
	}
	if again, _ := os.Stat(compose); !again.ModTime().Equal(built.ModTime()) {
		t.Error("the second setup-host built compose again")
	}
}
