package boxes

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// A path a user names in a snapshot must be absolute, clean and under
// /home/user or /workspace (issue 42, Deliver 5: RestorePaths refuses a
// path outside them).
func TestTreePathKeepsToHomeAndWorkspace(t *testing.T) {
	for p, want := range map[string]string{
		"/home/user":             "home/user",
		"/home/user/notes.txt":   "home/user/notes.txt",
		"/workspace":             "workspace",
		"/workspace/app/src":     "workspace/app/src",
		"/home/userx":            "",
		"/home":                  "",
		"/etc/passwd":            "",
		"/home/user/../../etc":   "",
		"home/user/notes.txt":    "",
		"/workspace/":            "",
		"/":                      "",
		"/workspace-other/a.txt": "",
	} {
		got, err := treePath("path", p)
		if got != want || (want == "") != errors.Is(err, ErrInvalid) {
			t.Errorf("treePath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
}

// A box's snapshots sort by the start of the operation that saved them,
// and a save's parent is the newest before its own name, never itself
// (a save run again after a crash).
func TestSnapshotNamesSortAndTheParentIsOlder(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDir(filepath.Join(t.TempDir(), "state"), "http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := objects.NewKeys("u1", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	var names []string
	for i, op := range []*Operation{
		{ID: "op-ffffffffffffffff", Started: t0},
		{ID: "op-0000000000000000", Started: t0.Add(1500 * time.Microsecond)}, // within the same second
		{ID: "op-8888888888888888", Started: t0.Add(time.Hour).In(time.FixedZone("east", 5*3600))},
	} {
		n := snapshotName(op)
		if err := objects.CheckName("snapshot", n); err != nil {
			t.Fatal(err)
		}
		if i > 0 && n <= names[i-1] {
			t.Fatalf("snapshot %s sorts before the earlier %s", n, names[i-1])
		}
		names = append(names, n)
		if err := st.Put(ctx, k.ManifestKey("keeper", n), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for below, want := range map[string]string{"": names[2], names[2]: names[1], names[1]: names[0], names[0]: ""} {
		if got, err := latestSnapshot(ctx, st, "u1", "keeper", below); err != nil || got != want {
			t.Errorf("latest below %q: %q %v, want %q", below, got, err, want)
		}
	}
	if got, err := latestSnapshot(ctx, st, "u1", "other", ""); err != nil || got != "" {
		t.Errorf("a name with no snapshot: %q %v", got, err)
	}
}
