//go:build booted

package boxes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/users"
)

// Must show: limits set by SetLimits (what `cocoonbox-api users limits`
// runs) hold at the next create: max_boxes first, then max_running, and
// raising both lets the create through; a value out of range or an unknown
// user is refused and changes nothing.
func TestSetLimitsTakesEffectAtTheNextCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	alice := e.user("alice", 1, 1)
	e.create(alice, "one")
	second := func() error {
		_, op, err := e.s.Create(ctx, Call{UserID: alice, RequestID: rid()}, CreateRequest{Name: "two", Image: v1})
		if err == nil {
			e.wait(alice, op) // the box boots before the test ends and deletes it
		}
		return err
	}
	steps := []struct {
		limits Limits
		rule   string // "" for a create that goes through
	}{
		{Limits{1, 1}, "max_boxes: the user holds 1 boxes and max_boxes is 1"},
		{Limits{2, 1}, "running limit: the user has 1 boxes starting, running or hibernating and max_running is 1"},
		{Limits{2, 2}, ""},
	}
	for _, s := range steps {
		if err := SetLimits(ctx, e.db.Pool, "alice", s.limits); err != nil {
			t.Fatal(err)
		}
		err := second()
		if s.rule == "" && err != nil || s.rule != "" && (!errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), s.rule)) {
			t.Fatalf("create under %+v: %v; want %q", s.limits, err, s.rule)
		}
	}
	for _, bad := range []struct {
		name   string
		limits Limits
		want   string
	}{
		{"alice", Limits{65, 1}, "max_boxes is 65: a limit is 0 to 64"},
		{"alice", Limits{1, -1}, "max_running is -1: a limit is 0 to 64"},
		{"nobody", Limits{1, 1}, `no such user: "nobody"`},
	} {
		if err := SetLimits(ctx, e.db.Pool, bad.name, bad.limits); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("SetLimits(%s, %+v) = %v; want %q", bad.name, bad.limits, err, bad.want)
		}
	}
	if _, err := LimitsOf(ctx, e.db.Pool, "nobody"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("LimitsOf an unknown user: %v", err)
	}
	if l, err := LimitsOf(ctx, e.db.Pool, "alice"); err != nil || l != (Limits{2, 2}) {
		t.Errorf("limits after the refusals: %+v, %v; want the last good {2 2}", l, err)
	}
}
