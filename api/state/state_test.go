package state_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func keys(t *testing.T, st store.Store, uid string) []string {
	t.Helper()
	var out []string
	if err := st.List(context.Background(), store.UserPrefix(uid), func(k string) error { out = append(out, k); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 42, Must show: a user deleted (cocoonbox-api users delete, which
// takes the row with no api call on the way), <uid>/ is gone from the
// store; another user's objects stay. The api's own sweeper does it, at
// boxes.recover_every.
func TestADeletedUsersObjectsLeaveTheStore(t *testing.T) {
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithConfig(func(c *config.Config) { c.Boxes.RecoverEvery = time.Second }))
	ctx := context.Background()
	bob := a.AddUser("bob", false)
	for _, uid := range []string{a.User.ID, bob.ID} {
		for _, k := range []string{"/flows/index", "/state/chunks/ab/abcd", "/state/manifests/box/s1"} {
			if err := a.State.Put(ctx, uid+k, []byte("sealed")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Users.Delete(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 2*time.Minute, "bob's objects gone from the store after his delete", func() (bool, string) {
		left := keys(t, a.State, bob.ID)
		return len(left) == 0, fmt.Sprintf("the store still holds %q", left)
	})
	if got := keys(t, a.State, a.User.ID); len(got) != 3 {
		t.Fatalf("alice's objects after bob's delete: %q, want her 3", got)
	}
}
