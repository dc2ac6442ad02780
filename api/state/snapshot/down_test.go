package snapshot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/api/state/store/weedtest"
)

// Issue 42, Deliver 5: a save to an S3 store that went down fails within
// its deadline with an error naming the snapshot and what the store said;
// a restore from it fails the same way. The control: the same save before
// the store went down succeeds.
func TestASaveToAStoreThatIsDownFailsNamingIt(t *testing.T) {
	w := weedtest.Start(t)
	ctx := context.Background()
	st, err := store.OpenS3(ctx, w.S3Config)
	must(t, err)
	_, k := setup(t)
	src := tree(t)
	m1, _, err := Save(ctx, st, k, src, paths, "box1", "s1", nil, 0, Options{Skip: skipSecrets})
	if err != nil {
		t.Fatalf("control: the save with the store up: %v", err)
	}
	w.Kill()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, _, err = Save(ctx, st, k, src, paths, "box1", "s2", m1, 0, Options{Skip: skipSecrets})
	if err == nil || !strings.Contains(err.Error(), "save box1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a save with the store down: %v; want an error naming the save and the refused connection", err)
	}
	if _, err := Restore(ctx, st, k, m1, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a restore with the store down: %v", err)
	}
}
