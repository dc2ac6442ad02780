//go:build booted

package local

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// statusField is one field of a /proc/PID/status text.
func statusField(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// uidMapBase is the host id that uid 0 of a uid_map text maps to, and
// the map's size.
func uidMapBase(t *testing.T, uidMap string) (base, size uint64) {
	t.Helper()
	f := strings.Fields(uidMap)
	if len(f) != 3 || f[0] != "0" {
		t.Fatalf("uid_map %q: want one line mapping 0", uidMap)
	}
	base, _ = strconv.ParseUint(f[1], 10, 32)
	size, _ = strconv.ParseUint(f[2], 10, 32)
	return base, size
}

// Issue 37, Deliver 1: root in a box is an unprivileged host uid, a
// range of its own, and the disk it writes keeps the ids the box sees.
func TestBoxRootIsNotHostRoot(t *testing.T) {
	t.Parallel()
	a, b := boot(t, v1), boot(t, v1)
	baseOf := func(id string) uint64 {
		got := mustSh(t, id, "cat /proc/self/uid_map")
		base, size := uidMapBase(t, got)
		if base == 0 || size != uidRangeSize {
			t.Fatalf("box %s maps uid 0 to host uid %d (%d ids): box root is host root", id, base, size)
		}
		if g := mustSh(t, id, "cat /proc/self/gid_map"); strings.Join(strings.Fields(g), " ") != strings.Join(strings.Fields(got), " ") {
			t.Fatalf("box %s: gid_map %q is not uid_map %q", id, g, got)
		}
		return base
	}
	ba, bb := baseOf(a.ID), baseOf(b.ID)
	if ba/uidRangeSize == bb/uidRangeSize {
		t.Fatalf("two running boxes share a uid range: %d and %d", ba, bb)
	}
	// The host's view of the box's PID 1: the range's root.
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.Leader))
	if err != nil {
		t.Fatal(err)
	}
	if uid := strings.Fields(statusField(string(st), "Uid")); len(uid) == 0 || uid[0] != strconv.FormatUint(ba, 10) {
		t.Fatalf("the box's PID 1 runs as host uid %v, want %d", uid, ba)
	}
	// A file root and user make in the box is theirs in the box and 0 and
	// 1000 on the disk (the idmapped layers): the disk moves to any range.
	mustSh(t, a.ID, "touch /root/by-root && runuser -u user -- touch /home/user/by-user")
	if got := mustSh(t, a.ID, "stat -c '%u %g' /root/by-root /home/user/by-user"); got != "0 0\n1000 1000\n" {
		t.Fatalf("owners in the box: %q", got)
	}
	upper := sup.cfg.StateDir + "/machines/" + a.ID + "/upper"
	for path, want := range map[string]uint32{"/root/by-root": 0, "/home/user/by-user": 1000} {
		if got := statUID(t, upper+path); got != want {
			t.Fatalf("%s is uid %d on the disk, want %d", path, got, want)
		}
	}
}

// Issue 37: a command through the door has no capability over the host:
// it runs in the box's user namespace, as root there.
func TestADoorCommandIsInTheBoxsUserNamespace(t *testing.T) {
	t.Parallel()
	m := boot(t, v1)
	door := mustSh(t, m.ID, "readlink /proc/self/ns/user; cat /proc/self/uid_map; id -u")
	unit := mustSh(t, m.ID, "readlink /proc/1/ns/user; cat /proc/1/uid_map; echo 0")
	if door != unit {
		t.Fatalf("a door command's user namespace, map and uid:\n%s\nthe box's PID 1's:\n%s", door, unit)
	}
}

// statUID is path's owner on the host, without following a link.
func statUID(t *testing.T, path string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid
}

// Issue 37, Deliver 2: a command through the door has exactly the rights
// of one the box's own systemd starts: the same capability sets, seccomp
// filter, no_new_privs and user namespace. (An nsenter'd command had the
// supervisor's whole bounding set and no filter.)
func TestADoorCommandHasTheRightsOfTheBoxsOwnUnit(t *testing.T) {
	t.Parallel()
	m := boot(t, v1)
	const show = "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status; cat /proc/self/uid_map; readlink /proc/self/ns/user"
	door := mustSh(t, m.ID, show)
	unit := mustSh(t, m.ID, "systemd-run --wait --pipe --quiet -- sh -c \""+show+"\"")
	if door != unit {
		t.Fatalf("a door command:\n%s\na unit of the box's systemd:\n%s", door, unit)
	}
	if !strings.Contains(door, "Seccomp:\t2") {
		t.Fatalf("no seccomp filter on a door command (nor on the unit):\n%s", door)
	}
	// And for user, through the login shell rsh uses, against user's
	// own unit.
	asUser, code := shell(t, m.ID, "sh", "runuser -l user -c \""+show+"\"")
	if code != 0 {
		t.Fatalf("runuser: %d", code)
	}
	userUnit := mustSh(t, m.ID, "systemd-run --wait --pipe --quiet -p User=user -- sh -c \""+show+"\"")
	if asUser != userUnit {
		t.Fatalf("user through the door:\n%s\nuser's unit:\n%s", asUser, userUnit)
	}
}
