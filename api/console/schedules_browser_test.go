package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
)

// addBox gives user a hibernated box name (the row a made box leaves;
// the Schedules page reads the boxes from the database, as the Schedules
// service does, so it needs no supervisor).
func addBox(t *testing.T, a *apitest.API, user, id, name string) {
	t.Helper()
	if _, err := a.Server.DB.Pool.Exec(context.Background(), `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
		VALUES ($1, $2, $3, 'cbdesk:v23-base', 'hibernated', 'local', $4)`, id, user, name, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
}

// schedule is a stored schedule of the test's user, as the database holds it.
type schedule struct {
	box, cron, zone string
	keepUp          int64
	next            time.Time
}

func storedSchedules(t *testing.T, a *apitest.API) []schedule {
	t.Helper()
	rows, err := a.Server.DB.Pool.Query(context.Background(), `SELECT b.name, coalesce(s.cron, ''), s.time_zone, s.keep_up_seconds, s.next_at
		FROM box_schedules s JOIN boxes b ON b.id = s.box_id WHERE s.user_id = $1 ORDER BY s.id`, a.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []schedule
	for rows.Next() {
		var s schedule
		if err := rows.Scan(&s.box, &s.cron, &s.zone, &s.keepUp, &s.next); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// Issue 46, Deliver 3: the Schedules page shows each box's schedules; a
// wake set in the page (once, and on a cron expression in a time zone) is
// stored and listed with its next wake in that zone; bad input is said
// beside its field and stores nothing; clearing asks first in the page's
// dialog, Cancel keeps it and Clear takes it; axe-clean and no wider than
// 360 px, in real Chromium.
func TestTheSchedulesPageSetsListsAndClearsWakes(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	addBox(t, a, a.User.ID, "cb-00000000000000a1", "main")
	addBox(t, a, a.User.ID, "cb-00000000000000a2", "work")
	bob := a.AddUser("bob", false)
	addBox(t, a, bob.ID, "cb-00000000000000b1", "bobs")

	u := newUI(t, a.URL)
	u.signIn("alice")
	u.check(pageState{name: "schedules-empty", path: "/cb/schedules", ready: "No schedules: work wakes only when it is used."})
	if text := u.textOf("#boxes"); strings.Contains(text, "bobs") {
		t.Errorf("alice's page lists bob's box: %q", text)
	}

	// Bad input: each said beside its field, nothing stored.
	u.js(`document.getElementById("box").value = "work";`, nil)
	u.click("#kind-cron")
	for _, bad := range []struct{ field, value, says string }{
		{"#cron", "every morning", `Cron expression "every morning" is not five fields`},
		{"#time_zone", "Mars/Olympus", `Time zone "Mars/Olympus" is not an IANA time zone, such as Europe/Berlin.`},
		{"#keep_up_minutes", "20000", "Keep it up for: give a whole number of minutes, 0 to 10080 (7 days)."},
	} {
		u.clear("#cron")
		u.typeIn("#cron", "30 7 * * 1-5")
		u.clear("#time_zone")
		u.typeIn("#time_zone", "Europe/Berlin")
		u.clear("#keep_up_minutes")
		u.typeIn("#keep_up_minutes", "90")
		u.clear(bad.field)
		u.typeIn(bad.field, bad.value)
		u.click("#add-submit")
		u.waitText(bad.says)
		if beside := u.textOf(bad.field + "-error"); !strings.HasPrefix(beside, bad.says) {
			t.Errorf("%s = %q: beside the field %q, want %q", bad.field, bad.value, beside, bad.says)
		}
		u.plain(bad.field + "-error")
	}
	if got := storedSchedules(t, a); len(got) != 0 {
		t.Fatalf("bad input stored %v", got)
	}

	// A wake on a cron expression in Berlin, kept up 90 minutes.
	u.clear("#keep_up_minutes")
	u.typeIn("#keep_up_minutes", "90")
	u.click("#add-submit")
	u.waitText("30 7 * * 1-5 in Europe/Berlin", "Added: work wakes next at")
	got := storedSchedules(t, a)
	if len(got) != 1 || got[0].box != "work" || got[0].cron != "30 7 * * 1-5" || got[0].zone != "Europe/Berlin" || got[0].keepUp != 5400 {
		t.Fatalf("stored after the cron wake: %+v", got)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if next := got[0].next.In(berlin); next.Hour() != 7 || next.Minute() != 30 || next.Weekday() == time.Saturday || next.Weekday() == time.Sunday {
		t.Errorf("the next wake is %s, not 07:30 of a weekday in Berlin", next)
	}
	wantRow := []string{"30 7 * * 1-5 in Europe/Berlin", got[0].next.In(berlin).Format("Mon 2 Jan 2006 15:04 MST"), "1 h 30 min", "Not kept up now", "Clear"}
	if rows := u.rows("#schedules-work"); len(rows) != 1 || strings.Join(rows[0], "|") != strings.Join(wantRow, "|") {
		t.Errorf("work's schedules in the page: %q, want [%q]", rows, wantRow)
	}

	// A one-time wake of main, two days ahead in UTC, not kept up.
	at := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Minute)
	u.js(`document.getElementById("box").value = "main";`, nil)
	u.click("#kind-once")
	u.js(`document.getElementById("at").value = arguments[0];`, nil, at.Format("2006-01-02T15:04"))
	u.clear("#time_zone")
	u.typeIn("#time_zone", "UTC")
	u.clear("#keep_up_minutes")
	u.typeIn("#keep_up_minutes", "0")
	u.click("#add-submit")
	once := "Once, " + at.Format("Mon 2 Jan 2006 15:04 MST")
	u.waitText(once, "Added: main wakes next at")
	if rows := u.rows("#schedules-main"); len(rows) != 1 || rows[0][0] != once || rows[0][2] != "No" {
		t.Errorf("main's schedules in the page: %q, want %q not kept up", rows, once)
	}
	if got := storedSchedules(t, a); len(got) != 2 || !got[1].next.Equal(at) {
		t.Fatalf("stored after the one-time wake: %+v, want its next at %s", got, at)
	}

	// Work's wake has fired (the scheduler's write): the page says until
	// when it keeps the box up, in Berlin.
	var sleepAt time.Time
	if err := a.Server.DB.Pool.QueryRow(context.Background(), `UPDATE box_schedules SET sleep_at = now() + interval '80 minutes'
		WHERE box_id = 'cb-00000000000000a2' RETURNING sleep_at`).Scan(&sleepAt); err != nil {
		t.Fatal(err)
	}
	upUntil := sleepAt.In(berlin).Format("Mon 2 Jan 2006 15:04 MST")

	// The page with both, checked whole: each Clear asks first.
	u.check(pageState{name: "schedules", path: "/cb/schedules", ready: once, shot: true, act: func(u *ui) {
		if rows := u.rows("#schedules-work"); len(rows) != 1 || rows[0][3] != upUntil {
			t.Errorf("work's wake fired: its row %q, want it up until %s", rows, upUntil)
		}
	}})

	// Clearing work's wake asks first; Cancel keeps it.
	clearWork := `#schedules-work button.danger`
	u.click(clearWork)
	u.waitDialog("Clear this wake of work?")
	u.click("#confirm-cancel")
	if got := storedSchedules(t, a); len(got) != 2 {
		t.Fatalf("Cancel cleared a wake: %+v", got)
	}
	u.click(clearWork)
	u.waitDialog("Clear this wake of work?")
	u.click("#confirm-ok")
	u.waitText("No schedules: work wakes only when it is used.")
	if got := storedSchedules(t, a); len(got) != 1 || got[0].box != "main" {
		t.Fatalf("after clearing work's wake: %+v, want main's alone", got)
	}
}

// waitDialog waits until the confirmation dialog is open asking title.
func (u *ui) waitDialog(title string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 15*time.Second)
	defer cancel()
	var seen string
	err := u.b.WaitFor(ctx, fmt.Sprintf("the dialog asking %q", title), func(_, _ string) bool {
		u.js(`const d = document.getElementById("confirm"); return d.open ? document.getElementById("confirm-title").textContent : "";`, &seen)
		return seen == title
	})
	if err != nil {
		u.t.Fatalf("%v; the dialog asked %q (empty: closed)", err, seen)
	}
}
