//go:build booted

package boxes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
)

// snapshot is what a refused call must leave as it was: every row count
// and the supervisor's machines.
func (e *env) snapshot() string {
	e.t.Helper()
	var boxes, ops, events int
	err := e.db.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM boxes), (SELECT count(*) FROM box_operations),
 (SELECT count(*) FROM box_events)`).Scan(&boxes, &ops, &events)
	if err != nil {
		e.t.Fatal(err)
	}
	ms, _ := sup.List(context.Background(), "")
	return fmt.Sprintf("boxes %d, operations %d, events %d, machines %d", boxes, ops, events, len(ms))
}

// Bad input (issue 11): box names, another user's box id, an operation on
// a box that is mid-operation, max_boxes exceeded, the running limit, an
// unknown image, a stale incarnation, a bad request id, a request id of
// another kind: each a clear error naming the rule, with its connect code,
// and nothing changed.
func TestBadInputIsRefusedNamingTheRuleAndChangesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice, bob := e.user("alice", 1, 1), e.user("bob", 2, 1)
	a := e.create(alice, "alice")
	// An operation held under way: the test takes the box's advisory lock,
	// so the hibernate's runner waits as behind another api's.
	release := e.hold(a.ID)
	_, held, err := e.s.Hibernate(ctx, Call{UserID: alice, RequestID: "held", Box: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	create := func(user, name, image string) func() error {
		return func() error {
			_, _, err := e.s.Create(ctx, Call{UserID: user, RequestID: rid()}, CreateRequest{Name: name, Image: image})
			return err
		}
	}
	cases := []struct {
		what string
		call func() error
		code connect.Code
		rule string
	}{
		{"an empty name", create(bob, "", v1), connect.CodeInvalidArgument, `name: "" must be 1 to 63 of [a-z0-9-]`},
		{"an upper-case name", create(bob, "Box", v1), connect.CodeInvalidArgument, "name:"},
		{"a name with _", create(bob, "my_box", v1), connect.CodeInvalidArgument, "name:"},
		{"a name from a digit", create(bob, "1box", v1), connect.CodeInvalidArgument, "start with a letter"},
		{"a name ending in -", create(bob, "box-", v1), connect.CodeInvalidArgument, "not end with '-'"},
		{"a name of 64", create(bob, "a"+strings.Repeat("b", 63), v1), connect.CodeInvalidArgument, "1 to 63"},
		{"a name with a dot", create(bob, "a.b", v1), connect.CodeInvalidArgument, "hostname"},
		{"an unknown image", create(bob, "box", "cbdesk:v9-base"), connect.CodeInvalidArgument, `image: "cbdesk:v9-base" is not an image this api can boot`},
		{"a bad image ref", create(bob, "box", "ubuntu:24.04"), connect.CodeInvalidArgument, "image: \"ubuntu:24.04\" must be cbdesk:vN-TIER"},
		{"a taken name", create(alice, "alice", v1), connect.CodeAlreadyExists, `name: the user has a box named "alice" already`},
		{"max_boxes exceeded", create(alice, "second", v1), connect.CodeResourceExhausted, "max_boxes: the user holds 1 boxes and max_boxes is 1"},
		{"a bad request id", func() error {
			_, _, err := e.s.Create(ctx, Call{UserID: bob, RequestID: "has space"}, CreateRequest{Name: "box"})
			return err
		}, connect.CodeInvalidArgument, "request_id:"},
		{"a request id of another kind", func() error {
			_, _, err := e.s.Save(ctx, Call{UserID: alice, RequestID: "held", Box: a.ID})
			return err
		}, connect.CodeInvalidArgument, `request_id: "held" began a hibernate`},
		{"another user's box id", func() error {
			_, _, err := e.s.Save(ctx, Call{UserID: bob, RequestID: rid(), Box: a.ID})
			return err
		}, connect.CodeNotFound, "box \"" + a.ID + "\": no such box"},
		{"another user's box name", func() error {
			_, err := e.s.Locate(ctx, bob, "alice")
			return err
		}, connect.CodeNotFound, "no such box"},
		{"a box that is neither id nor name", func() error {
			_, _, err := e.s.Save(ctx, Call{UserID: bob, RequestID: rid(), Box: "cb-XYZ"})
			return err
		}, connect.CodeInvalidArgument, "box: \"cb-XYZ\" is neither a box id"},
		{"a box mid-operation", func() error {
			_, _, err := e.s.Save(ctx, Call{UserID: alice, RequestID: rid(), Box: a.ID})
			return err
		}, connect.CodeFailedPrecondition, "is mid-operation (" + held.ID + ")"},
		{"a delete of a box mid-operation", func() error {
			_, _, err := e.s.Delete(ctx, Call{UserID: alice, RequestID: rid(), Box: "alice"})
			return err
		}, connect.CodeFailedPrecondition, "mid-operation"},
		{"a stale incarnation", func() error {
			_, _, err := e.s.Ensure(ctx, Call{UserID: alice, RequestID: rid(), Box: a.ID, Incarnation: 7})
			return err
		}, connect.CodeFailedPrecondition, "incarnation: 7 is stale, box alice is at incarnation 1"},
	}
	for _, c := range cases {
		before := e.snapshot()
		err := c.call()
		if err == nil || Code(err) != c.code || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("%s: %v (code %v), want %v naming %q", c.what, err, Code(err), c.code, c.rule)
		}
		if after := e.snapshot(); after != before {
			t.Errorf("%s changed something: before %s, after %s", c.what, before, after)
		}
	}
	release()
	e.wait(alice, held)

	// The running limit: bob may hold 2 boxes but run 1.
	e.create(bob, "first")
	before := e.snapshot()
	_, _, err = e.s.Create(ctx, Call{UserID: bob, RequestID: rid()}, CreateRequest{Name: "second", Image: v1})
	if Code(err) != connect.CodeResourceExhausted || !strings.Contains(errString(err), "running limit: the user has 1 boxes starting, running or hibernating and max_running is 1") {
		t.Errorf("over the running limit: %v", err)
	}
	if after := e.snapshot(); after != before {
		t.Errorf("over the running limit changed something: %s, then %s", before, after)
	}
}

// A retried request id answers the first call's operation and does
// nothing again, across kinds of call; a running box's Ensure has nothing
// to do.
func TestARetriedRequestIDReturnsTheFirstOperation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u := e.user("retrier", 1, 1)
	b1, op1, err := e.s.Create(ctx, Call{UserID: u, RequestID: "create-1"}, CreateRequest{Name: "retried", Image: v1})
	if err != nil {
		t.Fatal(err)
	}
	b2, op2, err := e.s.Create(ctx, Call{UserID: u, RequestID: "create-1"}, CreateRequest{Name: "retried", Image: v1})
	if err != nil || op2.ID != op1.ID || b2.ID != b1.ID {
		t.Fatalf("the retry answered %v %v (%v), want %s %s", b2, op2, err, b1.ID, op1.ID)
	}
	e.wait(u, op1)
	if _, op, err := e.s.Create(ctx, Call{UserID: u, RequestID: "create-1"}, CreateRequest{Name: "retried"}); err != nil || op.ID != op1.ID || op.Phase != PhaseDone {
		t.Fatalf("a retry after the end: %v %v", op, err)
	}
	if _, op, err := e.s.Ensure(ctx, Call{UserID: u, RequestID: rid(), Box: "retried"}); err != nil || op != nil {
		t.Fatalf("ensure of a running box: %v %v, want no operation", op, err)
	}
	var n int
	e.db.Pool.QueryRow(ctx, "SELECT count(*) FROM box_operations").Scan(&n)
	if ms, _ := sup.List(ctx, u); n != 1 || len(ms) != 1 {
		t.Fatalf("%d operations, %d machines; want one of each", n, len(ms))
	}
}

// An api whose supervisor did not start answers every Boxes call
// UNAVAILABLE with why, and has no Service to hand out.
func TestWithoutASupervisorEveryCallIsUnavailable(t *testing.T) {
	why := errors.New("sandbox.local.images: no such directory")
	h := Unavailable(why)
	_, err := h.List(context.Background(), connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(errString(err), why.Error()) {
		t.Fatalf("list: %v", err)
	}
	_, err = h.Create(context.Background(), connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "r", Name: "x"}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("create: %v", err)
	}
	if s, err := h.Service(); s != nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("service: %v %v", s, err)
	}
}
