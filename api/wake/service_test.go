package wake_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcptest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
)

// Schedules through the api as the binary builds it: a user sets, lists
// and clears their box's schedules by its name; another user's box is
// NOT_FOUND; bad input is INVALID_ARGUMENT naming the field, nothing
// stored.
func TestAUserSetsListsAndClearsTheirBoxsSchedules(t *testing.T) {
	a := apitest.New(t)
	ctx := context.Background()
	bob := a.AddUser("bob", false)
	for _, u := range []struct{ id, box string }{{a.User.ID, "cb-00000000000000a1"}, {bob.ID, "cb-00000000000000b1"}} {
		if _, err := a.Server.DB.Pool.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
			VALUES ($1, $2, 'main', 'cbdesk:v1-base', 'hibernated', 'local', $3)`, u.box, u.id, make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
	}
	c := controlv1connect.NewSchedulesClient(http.DefaultClient, a.URL)
	as := func(user string, req interface{ Header() http.Header }) {
		req.Header().Set("Authorization", "Bearer "+string(a.PersonalToken(user)))
	}
	set := connect.NewRequest(&controlv1.SetScheduleRequest{Box: "main", Cron: "30 7 * * 1-5", TimeZone: "Europe/Berlin", KeepUpSeconds: 3600})
	as(a.User.ID, set)
	sc, err := c.SetSchedule(ctx, set)
	if err != nil || sc.Msg.BoxId != "cb-00000000000000a1" || sc.Msg.NextAtMs <= time.Now().UnixMilli() {
		t.Fatalf("set: %v %v", sc, err)
	}
	list := connect.NewRequest(&controlv1.ListSchedulesRequest{})
	as(bob.ID, list)
	if l, err := c.ListSchedules(ctx, list); err != nil || len(l.Msg.Schedules) != 0 {
		t.Fatalf("bob's list: %v %v, want none", l, err)
	}
	for _, bad := range []struct {
		req   *controlv1.SetScheduleRequest
		field string
	}{
		{&controlv1.SetScheduleRequest{Box: "main", Cron: "every morning"}, "cron"},
		{&controlv1.SetScheduleRequest{Box: "main", AtMs: time.Now().Add(-time.Hour).UnixMilli()}, "at"},
		{&controlv1.SetScheduleRequest{Box: "main", Cron: "0 7 * * *", KeepUpSeconds: -1}, "keep_up_seconds"},
		{&controlv1.SetScheduleRequest{Box: "main", Cron: "0 7 * * *", TimeZone: "Nowhere/Else"}, "time_zone"},
	} {
		r := connect.NewRequest(bad.req)
		as(a.User.ID, r)
		_, err := c.SetSchedule(ctx, r)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("%v: %v, want INVALID_ARGUMENT naming %s", bad.req, err, bad.field)
		}
	}
	// Bob names alice's box by its id: not his.
	other := connect.NewRequest(&controlv1.SetScheduleRequest{Box: "cb-00000000000000a1", Cron: "0 7 * * *"})
	as(bob.ID, other)
	if _, err := c.SetSchedule(ctx, other); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("bob on alice's box: %v, want NOT_FOUND", err)
	}
	list = connect.NewRequest(&controlv1.ListSchedulesRequest{Box: "main"})
	as(a.User.ID, list)
	if l, err := c.ListSchedules(ctx, list); err != nil || len(l.Msg.Schedules) != 1 || l.Msg.Schedules[0].Cron != "30 7 * * 1-5" {
		t.Fatalf("alice's list after bad input: %v %v, want the one", l, err)
	}
	clear := connect.NewRequest(&controlv1.ClearSchedulesRequest{Box: "main"})
	as(a.User.ID, clear)
	if n, err := c.ClearSchedules(ctx, clear); err != nil || n.Msg.Cleared != 1 {
		t.Fatalf("clear: %v %v", n, err)
	}
	// The control MCP's tools, by the box's name.
	m := mcptest.Connect(t, a.URL+"/cocoonbox.mcp/control", string(a.PersonalToken(a.User.ID)))
	got := m.OK(t, "box_schedule_set", map[string]any{"box": "main", "at": time.Now().Add(time.Hour).Format(time.RFC3339), "keep_up_seconds": 600})
	if got["box_id"] != "cb-00000000000000a1" {
		t.Fatalf("box_schedule_set: %v", got)
	}
	if got := m.OK(t, "box_schedule_list", map[string]any{"box": "main"}); len(got["schedules"].([]any)) != 1 {
		t.Fatalf("box_schedule_list: %v", got)
	}
	if msg := m.Refused(t, "a bad time zone", "box_schedule_set", map[string]any{"box": "main", "cron": "0 7 * * *", "time_zone": "Nowhere/Else"}); !strings.Contains(msg, "time_zone") {
		t.Fatalf("box_schedule_set with a bad zone: %q", msg)
	}
	if got := m.OK(t, "box_schedule_clear", map[string]any{"box": "main"}); got["cleared"] != float64(1) {
		t.Fatalf("box_schedule_clear: %v", got)
	}
	unauth := connect.NewRequest(&controlv1.ListSchedulesRequest{})
	var ce *connect.Error
	if _, err := c.ListSchedules(ctx, unauth); !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated {
		t.Fatalf("without a token: %v", err)
	}
}
