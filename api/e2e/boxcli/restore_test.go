//go:build booted

package boxcli

import (
	"slices"
	"strings"
	"testing"
)

// TestCreateRestoreBringsTheSavedHomeBack: a file written in /home/user
// (through cocoonbox rsh), a save, a delete; box create --restore makes
// the box again from the save Delete kept, and the file is there. As the
// control, --restore of a name no deleted box left is refused, naming
// --restore's field and the rule, and nothing is created.
func TestCreateRestoreBringsTheSavedHomeBack(t *testing.T) {
	if bs := list(t); len(bs) != 0 {
		t.Fatalf("boxes before the test: %+v", bs)
	}
	r := cli(t, "box", "create", "never", "--restore")
	if r.code != 1 || !strings.Contains(r.stderr, `box create "never"`) || !strings.Contains(r.stderr, "restore:") || !strings.Contains(r.stderr, "Save before Delete") {
		t.Fatalf("create --restore with nothing kept: exit %d %s", r.code, r.stderr)
	}
	if bs := list(t); len(bs) != 0 {
		t.Fatalf("the refused --restore made a box: %+v", bs)
	}

	ok(t, "box", "create", "kept", "--image", "cbdesk:v1-base")
	ok(t, "rsh", "--box", "kept", "--", "echo restored-by-boxcli > /home/user/kept.txt")
	if _, phases, _ := followed(t, ok(t, "box", "save", "kept", "--json"), "save"); !slices.Contains(phases, "saving") {
		t.Fatalf("save: phases %v", phases)
	}
	ok(t, "box", "delete", "kept", "--confirm")
	if bs := list(t); len(bs) != 0 {
		t.Fatalf("boxes after delete: %+v", bs)
	}

	first, phases, states := followed(t, ok(t, "box", "create", "kept", "--restore", "--json"), "create")
	if first.Name != "kept" || !slices.Contains(states, "running") {
		t.Fatalf("create --restore: answer %+v, phases %v, states %v", first, phases, states)
	}
	defer ok(t, "box", "delete", "kept", "--confirm")
	if bs := list(t); len(bs) != 1 || bs[0].Image != "cbdesk:v1-base" {
		t.Fatalf("boxes after create --restore: %+v, want kept on the save's image", bs)
	}
	if got := ok(t, "rsh", "--box", "kept", "--", "cat /home/user/kept.txt"); got != "restored-by-boxcli\n" {
		t.Fatalf("/home/user/kept.txt after create --restore: %q", got)
	}
	snapshotsLsAndRestore(t)
}

// snapshotsLsAndRestore: the save went into the state store too (issue
// 42, Deliver 4): box snapshots lists it, box ls shows the file in it,
// box restore puts the file back into the running box after a change,
// and refuses a path outside /home/user and /workspace, naming the rule.
func snapshotsLsAndRestore(t *testing.T) {
	t.Helper()
	if got := ok(t, "box", "snapshots", "kept"); strings.Count(got, "kept@") != 1 {
		t.Fatalf("box snapshots kept:\n%s", got)
	}
	if got := ok(t, "box", "ls", "kept"); !strings.Contains(got, " /home/user/kept.txt\n") || !strings.HasPrefix(got, "kept@") {
		t.Fatalf("box ls kept:\n%s", got)
	}
	ok(t, "rsh", "--box", "kept", "--", "echo overwritten > /home/user/kept.txt")
	if got := ok(t, "box", "restore", "kept", "/home/user/kept.txt"); !strings.HasPrefix(got, "Restored ") || !strings.Contains(got, " in place.") {
		t.Fatalf("box restore kept /home/user/kept.txt: %q", got)
	}
	if got := ok(t, "rsh", "--box", "kept", "--", "stat -c %U /home/user/kept.txt; cat /home/user/kept.txt"); got != "user\nrestored-by-boxcli\n" {
		t.Fatalf("/home/user/kept.txt after box restore: %q", got)
	}
	r := cli(t, "box", "restore", "kept", "/etc/passwd")
	if r.code != 1 || !strings.Contains(r.stderr, "outside /home/user and /workspace") {
		t.Fatalf("box restore kept /etc/passwd: exit %d %s", r.code, r.stderr)
	}
}
