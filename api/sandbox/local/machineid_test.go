//go:build booted

package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"golang.org/x/sys/unix"
)

// Issue 24, Deliver 9: Boot answers the machine id the box's systemd
// took, so the api reads nothing in the box after Boot. A fresh disk
// takes the id the supervisor chose (--uuid); a restored disk keeps its
// own, which nspawn prefers; Get reports it while the machine runs.
func TestBootReportsTheMachineIDTheBoxTook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := boot(t, v1)
	held := strings.TrimSpace(mustSh(t, m.ID, "cat /etc/machine-id"))
	if !sandbox.MachineIDRule.MatchString(held) || m.MachineID != held {
		t.Fatalf("Boot answered machine id %q; the box's /etc/machine-id holds %q", m.MachineID, held)
	}
	if g := mustGet(t, m.ID); g.MachineID != held {
		t.Fatalf("Get answers machine id %q; the box holds %q", g.MachineID, held)
	}
	// The box changes it, as a wake does; a boot of its disk takes that one.
	const changed = "0123456789abcdef0123456789abcdef"
	mustSh(t, m.ID, "echo "+changed+" >/etc/machine-id.new && mv /etc/machine-id.new /etc/machine-id && sync")
	save, err := sup.Save(ctx, m.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sup.DeleteSave(ctx, save.ID)
	r, err := sup.Restore(ctx, save.ID, sandbox.Spec{ID: newID("t"), Tenant: m.Tenant})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteMachine(t, r.ID) })
	r, err = sup.Boot(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if held := strings.TrimSpace(mustSh(t, r.ID, "cat /etc/machine-id")); r.MachineID != changed || held != changed {
		t.Fatalf("the restored box: Boot answered %q, it holds %q; its disk held %s", r.MachineID, held, changed)
	}
}

// bootMachineID on each shape a box's /etc/machine-id can take: an id is
// the id; missing, empty or blank gets a new v4 id the supervisor chose;
// anything nspawn would refuse or resolve elsewhere (a link, a directory,
// a FIFO, a malformed or overlong file) is answered unknown, without
// following a link out of the root or blocking on a FIFO.
func TestBootMachineIDOnEachShapeOfTheFile(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "host-id")
	if err := os.WriteFile(outside, []byte("fedcba9876543210fedcba9876543210\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const id = "0123456789abcdef0123456789abcdef"
	cases := map[string]struct {
		make   func(etc string) error
		want   string // "new": a chosen id
		chosen bool
	}{
		"an id":             {func(e string) error { return os.WriteFile(e+"/machine-id", []byte(id+"\n"), 0o444) }, id, false},
		"an id, no newline": {func(e string) error { return os.WriteFile(e+"/machine-id", []byte(id), 0o444) }, id, false},
		"missing":           {func(e string) error { return nil }, "new", true},
		"empty":             {func(e string) error { return os.WriteFile(e+"/machine-id", nil, 0o444) }, "new", true},
		"blank":             {func(e string) error { return os.WriteFile(e+"/machine-id", []byte("\n"), 0o444) }, "new", true},
		"no /etc":           {func(e string) error { return os.Remove(e) }, "new", true},
		"uninitialized":     {func(e string) error { return os.WriteFile(e+"/machine-id", []byte("uninitialized\n"), 0o444) }, "", false},
		"upper case":        {func(e string) error { return os.WriteFile(e+"/machine-id", []byte(strings.ToUpper(id)), 0o444) }, "", false},
		"overlong":          {func(e string) error { return os.WriteFile(e+"/machine-id", []byte(id+id), 0o444) }, "", false},
		"a link out":        {func(e string) error { return os.Symlink(outside, e+"/machine-id") }, "", false},
		"a link inside": {func(e string) error {
			_ = os.WriteFile(e+"/id", []byte(id), 0o444)
			return os.Symlink("id", e+"/machine-id")
		}, "", false},
		"/etc a link": {func(e string) error { _ = os.Remove(e); return os.Symlink(filepath.Dir(outside), e) }, "", false},
		"a directory": {func(e string) error { return os.Mkdir(e+"/machine-id", 0o755) }, "", false},
		"a FIFO":      {func(e string) error { return unix.Mkfifo(e+"/machine-id", 0o644) }, "", false},
	}
	seen := map[string]bool{}
	for name, c := range cases {
		root := t.TempDir()
		etc := filepath.Join(root, "etc")
		if err := os.Mkdir(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.make(etc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, chosen, err := bootMachineID(root)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if chosen != c.chosen {
			t.Errorf("%s: chosen %v, want %v", name, chosen, c.chosen)
		}
		switch {
		case c.want == "new":
			// A v4 UUID: version nibble 4, variant bits 10.
			if !sandbox.MachineIDRule.MatchString(got) || got[12] != '4' || !strings.ContainsRune("89ab", rune(got[16])) || seen[got] {
				t.Errorf("%s: chose %q; want a new v4 id", name, got)
			}
			seen[got] = true
		case got != c.want:
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}
