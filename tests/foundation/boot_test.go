//go:build booted

// Package foundation holds the booted-box tests of the image recipe and the
// box harness itself (issue: foundation): the box boots clean, every unit we
// ship is enabled as its preset says and passes systemd-analyze verify, and
// the image tar imports into a real Docker engine.
package foundation

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// presets reads the box's cocoonbox preset files into unit → "enable" or
// "disable", as `systemctl preset` applies them (first match wins).
func presets(t *testing.T, b *box.Box) map[string]string {
	t.Helper()
	out := b.MustSh(t, "cat /usr/lib/systemd/system-preset/*cocoonbox*.preset")
	want := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && (f[0] == "enable" || f[0] == "disable") {
			if _, seen := want[f[1]]; !seen {
				want[f[1]] = f[0]
			}
		}
	}
	return want
}

// ourUnits lists the cocoonbox unit files installed in the box.
func ourUnits(t *testing.T, b *box.Box) []string {
	t.Helper()
	out := b.MustSh(t, "cd /usr/lib/systemd/system && ls -d cocoonbox-* 2>/dev/null | grep -v '\\.d$' || true")
	return strings.Fields(out)
}

func TestBaseImageBootsToRunningWithNoFailedUnit(t *testing.T) {
	b := box.Boot(t, box.Options{})
	state, _ := b.Run("systemctl", "is-system-running")
	if s := strings.TrimSpace(state); s != "running" {
		failed, _ := b.FailedUnits()
		t.Fatalf("system state %q, want running; failed units: %v", s, failed)
	}
	img := string(b.Must(t, "cat", "/etc/cocoonbox/image"))
	if !strings.HasPrefix(img, "cbdesk:v") || !strings.Contains(img, "tier=base") {
		t.Errorf("/etc/cocoonbox/image = %q, want cbdesk:vN and tier=base", img)
	}
}

// image/boot-trim (issue 24, Deliver 9): a box's boot runs no generator
// (each is masked by name, so one a later package brings fails here until
// someone decides) and no first-boot update (/etc and /var carry /usr's
// stamp, so systemd-sysusers and the like are skipped), mounts no
// hugetlbfs, writes no utmp record, and its user manager runs no
// xdg-autostart generator.
func TestABoxBootRunsNoGeneratorAndNoFirstBootUpdate(t *testing.T) {
	b := box.Boot(t, box.Options{})
	for _, g := range strings.Fields(b.MustSh(t, "ls /usr/lib/systemd/system-generators")) {
		if target := strings.TrimSpace(b.MustSh(t, "readlink /etc/systemd/system-generators/"+g+" || true")); target != "/dev/null" {
			t.Errorf("generator %s is not masked in /etc/systemd/system-generators (image/boot-trim names each)", g)
		}
	}
	if out := b.MustSh(t, "ls -A /run/systemd/generator /run/systemd/generator.early /run/systemd/generator.late 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("generators wrote units at boot:\n%s", out)
	}
	for _, u := range []string{"systemd-sysusers.service", "ldconfig.service", "systemd-journal-catalog-update.service"} {
		if got := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "ConditionResult", u)); got != "no" {
			t.Errorf("%s: ConditionResult=%s at boot, want no (ConditionNeedsUpdate= false: /etc and /var are stamped)", u, got)
		}
	}
	for _, u := range []string{"dev-hugepages.mount", "systemd-update-utmp.service", "systemd-update-utmp-runlevel.service"} {
		if got := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "LoadState", u)); got != "masked" {
			t.Errorf("%s: LoadState=%s, want masked", u, got)
		}
	}
	if target := strings.TrimSpace(b.MustSh(t, "readlink /etc/systemd/user-generators/systemd-xdg-autostart-generator || true")); target != "/dev/null" {
		t.Errorf("the user manager's xdg-autostart generator is not masked")
	}
	// The user manager is queued with the boot's first jobs, not when
	// logind, up, asks for it (issue 24, Deliver 9): user-runtime-dir@1000
	// starts before logind is up, and user lingers still.
	ts := strings.Fields(b.MustSh(t, "systemctl show -P InactiveExitTimestampMonotonic user-runtime-dir@1000.service; systemctl show -P ActiveEnterTimestampMonotonic systemd-logind.service; systemctl is-active user@1000.service; test -f /var/lib/systemd/linger/user && echo lingers"))
	if len(ts) != 4 || ts[2] != "active" || ts[3] != "lingers" {
		t.Fatalf("user-runtime-dir@1000 started, logind up, user@1000, linger: %q", ts)
	}
	started, _ := strconv.ParseUint(ts[0], 10, 64)
	up, _ := strconv.ParseUint(ts[1], 10, 64)
	if started == 0 || up == 0 || started >= up {
		t.Errorf("user-runtime-dir@1000 started at %d µs, logind was up at %d µs: the user manager waited for logind to ask for it", started, up)
	}
}

func TestEveryCocoonboxUnitIsLoadedAndEnabledAsThePresetSays(t *testing.T) {
	b := box.Boot(t, box.Options{})
	units := ourUnits(t, b)
	if len(units) == 0 {
		t.Fatal("no cocoonbox unit is installed in /usr/lib/systemd/system")
	}
	for _, u := range units {
		if load := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "LoadState", u)); load != "loaded" {
			t.Errorf("%s: LoadState=%s, want loaded", u, load)
		}
	}
	// Every unit our presets name, ours or Debian's, is in the state they say.
	for u, verdict := range presets(t, b) {
		enabled, _ := b.Run("systemctl", "is-enabled", u)
		enabled = strings.TrimSpace(enabled)
		switch {
		case verdict == "enable" && enabled != "enabled":
			t.Errorf("%s: is-enabled=%q, but the preset says enable", u, enabled)
		case verdict == "disable" && enabled == "enabled":
			t.Errorf("%s: is-enabled=%q, but the preset says disable", u, enabled)
		}
	}
}

func TestSystemdAnalyzeVerifyPassesForEveryUnitWeShip(t *testing.T) {
	b := box.Boot(t, box.Options{})
	units := ourUnits(t, b)
	user := strings.Fields(b.MustSh(t, "cd /usr/lib/systemd/user && ls cocoonbox-* 2>/dev/null || true"))
	if len(units)+len(user) == 0 {
		t.Fatal("no cocoonbox unit to verify")
	}
	for _, u := range units {
		res, err := b.Exec(box.Cmd{Args: []string{"systemd-analyze", "verify", "/usr/lib/systemd/system/" + u}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || strings.TrimSpace(res.Stderr) != "" {
			t.Errorf("systemd-analyze verify %s: exit %d\n%s%s", u, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	// A user unit is verified as user, in user's manager's runtime
	// directory (as root, --user finds none and fails before verifying).
	for _, u := range user {
		res, err := b.Exec(box.Cmd{User: "user", Args: []string{"env", "XDG_RUNTIME_DIR=/run/user/1000", "systemd-analyze", "--user", "verify", "/usr/lib/systemd/user/" + u}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Errorf("systemd-analyze --user verify %s: exit %d\n%s%s", u, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
}

// Several boxes run at once, each with its own machine name, and none is
// left running after Stop.
func TestSeveralBoxesRunAtOnceAndStopClean(t *testing.T) {
	a := box.Boot(t, box.Options{})
	c := box.Boot(t, box.Options{})
	if a.Name == c.Name || a.Leader() == c.Leader() {
		t.Fatalf("two boxes share a name or leader: %s/%d %s/%d", a.Name, a.Leader(), c.Name, c.Leader())
	}
	if err := a.WriteFile("/tmp/only-in-a", []byte("a\n"), 0o600, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run("test", "-e", "/tmp/only-in-a"); err == nil {
		t.Fatal("a file written in one box is visible in the other")
	}
	// Bug this names: boxes started from one process shared nspawn's
	// "payload" cgroup, and one box's systemd removed another's unit
	// cgroups (units failed with 219/CGROUP at random). Each box's systemd
	// must sit in a cgroup of its own, and a unit started in one box must
	// not show up in the other's cgroup tree.
	cgA, cgC := hostCgroup(t, a.Leader()), hostCgroup(t, c.Leader())
	if cgA == cgC {
		t.Fatalf("boxes %s and %s share the cgroup %s", a.Name, c.Name, cgA)
	}
	a.Must(t, "systemd-run", "--unit=cbtest-only-in-a", "sleep", "600")
	if out, _ := c.Run("systemd-cgls", "--no-pager"); strings.Contains(out, "cbtest-only-in-a") {
		t.Fatalf("a unit of box %s shows in box %s's cgroup tree:\n%s", a.Name, c.Name, out)
	}
	leader := a.Leader()
	a.Stop()
	if box.ProcessRunning(leader) {
		t.Fatalf("box %s's PID 1 (%d) still runs after Stop", a.Name, leader)
	}
}

// hostCgroup is the cgroup of pid in the hierarchy that tracks processes
// for systemd (name=systemd on a v1 host, else the v2 one), as the host
// sees it.
func hostCgroup(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	v2 := ""
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) != 3:
		case parts[1] == "name=systemd":
			return parts[2]
		case parts[0] == "0":
			v2 = parts[2]
		}
	}
	return v2
}
