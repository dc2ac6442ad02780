package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/signup"
)

// Issue 41, Deliver 2, on the pages beyond Keys and Admin: a refused
// action of Devices (Revoke), Agents (Revoke), Account (Delete) and the
// signup queue (Leave) shows the api's plain sentence in the summary at
// the top, and beside its field where it has one; the list's or the
// status's reload after it keeps it shown; the action's button is
// disabled while its call is in flight. Each refusal is a real one of
// the api: a database that refuses the revoke (a trigger), an account
// made an admin after its page loaded, a person an admin rejected after
// their page loaded.
func TestThePagesShowEachRefusalAndKeepItWhileTheyReload(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := a.DB.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	a.AddUser("boss", true)
	boss := a.SignIn("boss")
	u := newUI(t, a.URL)

	// The queue, signed out: a person queued (their cb_queue cookie, as
	// the GitHub callback leaves it) whom an admin rejects after their
	// page loaded.
	exec("UPDATE signup_settings SET enabled = true, invite_only = false, seats = 0, hourly_accounts = 100")
	queued, err := a.Signup.Arrive(ctx, signup.Arrival{IdP: "github", Subject: "1001", Login: "Person1", Email: "p1@example.com", EmailVerified: true})
	if err != nil || queued.QueueSecret == "" {
		t.Fatalf("queue a person: %+v, %v", queued, err)
	}
	u.open("/cb/queue")
	u.waitText("not in the queue")
	u.step("the queue cookie", u.b.SetCookie(u.ctx, &http.Cookie{Name: signup.QueueCookie, Value: queued.QueueSecret, Path: "/cb/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode}))
	u.open("/cb/queue")
	u.waitText("Place 1 of 1 waiting")
	if resp, body := boss.Send("POST", "/cb/api/queue/"+queued.QueueID+"/reject", "application/json", "{}"); resp.StatusCode != 200 {
		t.Fatalf("reject: %d %s", resp.StatusCode, body)
	}
	u.refusedInFlight("#leave", "#leave", "An admin declined your signup, so you have no place in the queue to leave.", "")
	u.waitText("An admin declined this signup.") // the page's own look, 15 s on
	u.keeps("the queue after its status's reload", "An admin declined your signup, so you have no place in the queue to leave.", "")

	// Devices and Agents: the database refuses the revoke.
	alice := a.SignIn("alice")
	device := addDevice(t, a, "laptop")
	grantAgent(t, a.URL, alice, "codex")
	if resp, body := alice.Send("POST", "/cb/api/agents/seen", "application/json", "{}"); resp.StatusCode != 204 {
		t.Fatalf("mark the agent seen: %d %s", resp.StatusCode, body)
	}
	exec(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`)
	exec(`CREATE TRIGGER refuse BEFORE DELETE ON user_tokens FOR EACH ROW EXECUTE FUNCTION refuse()`)
	exec(`CREATE TRIGGER refuse BEFORE UPDATE ON oauth_grants FOR EACH ROW EXECUTE FUNCTION refuse()`)
	u.signIn("alice")
	u.open("/cb/devices")
	u.waitText("laptop")
	u.mark("#device-" + device)
	u.refusedInFlight("#device-"+device+" button.revoke", "#device-"+device+" button.revoke", "The api failed. Try again in a minute.", "")
	u.reloaded("#device-" + device)
	u.keeps("Devices after the list's reload", "The api failed. Try again in a minute.", "")

	u.open("/cb/agents")
	u.waitText("1 box, 1 running") // the row's caps: the intro names codex too
	u.mark("#agents tbody tr")
	u.refusedInFlight("#agents tbody tr button.revoke", "#agents tbody tr button.revoke", "The api failed. Try again in a minute.", "")
	u.reloaded("#agents tbody tr")
	u.keeps("Agents after the list's reload", "The api failed. Try again in a minute.", "")

	// Account: alice is made an admin after the page loaded.
	u.open("/cb/account")
	u.waitText("You are alice")
	exec("UPDATE users SET admin = true WHERE name = 'alice'")
	u.typeIn("#name", "alice")
	u.refusedInFlight("#delete-submit", "#delete-submit", "An admin's account cannot be deleted here. Ask another admin to delete it.", "name")
}

// refusedInFlight clicks css and confirms in the dialog, holding the
// action's call (any but a GET) until button is seen disabled and busy;
// then it waits for the refusal says in the summary (and beside field,
// when not ""), a plain sentence.
func (u *ui) refusedInFlight(css, button, says, field string) {
	u.t.Helper()
	u.js(`window.__held = 0;
const f = window.fetch;
let open;
window.__gate = new Promise((r) => { open = r; });
window.__open = open;
window.fetch = async (path, opts) => { if (opts && opts.method !== "GET") { window.__held++; await window.__gate; } return f(path, opts); };`, nil)
	u.click(css)
	u.waitFor("the confirmation of "+css, `return document.getElementById("confirm").open;`)
	u.click("#confirm-ok")
	u.waitFor("the call of "+css+" held", `return window.__held === 1;`)
	var busy struct {
		Disabled bool
		Busy     string
	}
	u.js(`const b = document.querySelector(arguments[0]); return { disabled: b.disabled, busy: b.getAttribute("aria-busy") || "" };`, &busy, button)
	if !busy.Disabled || busy.Busy != "true" {
		u.t.Errorf("%s while its call is in flight: disabled %v, aria-busy %q", button, busy.Disabled, busy.Busy)
	}
	u.js(`window.__open();`, nil)
	u.waitText(says)
	u.keeps(css+"'s refusal", says, field)
}

// keeps fails unless the summary shows says, a plain sentence, and, when
// field is not "", the same sentence stands beside #field, marked invalid.
func (u *ui) keeps(what, says, field string) {
	u.t.Helper()
	var got struct {
		Summary, Beside, Invalid string
	}
	u.js(`const s = document.getElementById("error-summary"), f = arguments[0] && document.getElementById(arguments[0]);
const beside = f && document.getElementById(arguments[0] + "-error");
return { summary: s.hidden ? "" : s.textContent, beside: beside ? beside.textContent : "", invalid: f ? f.getAttribute("aria-invalid") || "" : "" };`, &got, field)
	if !strings.Contains(got.Summary, says) || codeLike.MatchString(says) {
		u.t.Errorf("%s: the summary reads %q; want the plain sentence %q", what, got.Summary, says)
	}
	if field != "" && (got.Beside != says || got.Invalid != "true") {
		u.t.Errorf("%s: beside #%s %q (aria-invalid %q); want %q", what, field, got.Beside, got.Invalid, says)
	}
}

// mark marks the element css selects, so reloaded can tell it was
// replaced.
func (u *ui) mark(css string) {
	u.t.Helper()
	u.js(`document.querySelector(arguments[0]).dataset.before = "1";`, nil, css)
}

// reloaded waits until the page's list replaced the marked element css
// selects with a new one.
func (u *ui) reloaded(css string) {
	u.t.Helper()
	u.waitFor("the list's reload ("+css+" replaced)", `const e = document.querySelector(`+"`"+css+"`"+`); return !!e && !e.dataset.before;`)
}

// waitFor waits until script answers true, for 30 s at most.
func (u *ui) waitFor(what, script string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	var ok bool
	u.step("wait for "+what, u.b.WaitFor(ctx, what, func(_, _ string) bool {
		u.js(script, &ok)
		return ok
	}))
}

// Issue 41, Deliver 6: Admin says the seats and the new accounts' daily
// cap as a person does: "3 of 5 seats used" with alice and two signup
// accounts (a seat is any account but an admin's) of five seats, the cap in US dollars in its field, and a cap out of range
// refused in dollars beside its field and in the summary (the api's
// refusal speaks in micro-dollars: daily_cap_micros is 1 to 1000000000).
func TestAdminSaysSeatsAndTheCapAsAPersonDoes(t *testing.T) {
	t.Parallel()
	a := apitest.New(t, apitest.WithoutSession())
	a.AddUser("boss", true)
	ctx := context.Background()
	if _, err := a.DB.Pool.Exec(ctx, `UPDATE signup_settings SET enabled = true, invite_only = false, seats = 5, hourly_accounts = 100,
		daily_cap_micros = 2500000`); err != nil {
		t.Fatal(err)
	}
	for i, login := range []string{"Person1", "Person2"} {
		out, err := a.Signup.Arrive(ctx, signup.Arrival{IdP: "github", Subject: fmt.Sprint(1001 + i), Login: login,
			Email: strings.ToLower(login) + "@example.com", EmailVerified: true})
		if err != nil || out.UserID == "" {
			t.Fatalf("%s's signup: %+v, %v; want an account at once", login, out, err)
		}
	}
	u := newUI(t, a.URL)
	u.signIn("boss")
	u.open("/cb/admin")
	u.waitText("3 of 5 seats used; 2 of at most 100 admitted in the last hour; signup is open.")
	var capValue, capLabel string
	u.js(`return document.getElementById("daily_cap").value;`, &capValue)
	u.js(`return document.getElementById("daily_cap").labels[0].textContent;`, &capLabel)
	if capValue != "2.5" || !strings.Contains(capLabel, "in US dollars") {
		t.Errorf("the daily cap's field reads %q, labelled %q; want 2.5 US dollars", capValue, capLabel)
	}
	for _, c := range []struct{ typed, says string }{
		{"2000", "The daily cap: give $0.000001 to $1000.00, not $2000.00."},
		{"-1", "The daily cap: give $0.000001 to $1000.00, not -$1.00."},
	} {
		u.clear("#daily_cap")
		u.typeIn("#daily_cap", c.typed)
		u.click("#save")
		u.waitText(c.says)
		u.waitIdle("#save")
		u.keeps("a daily cap of "+c.typed, c.says, "daily_cap")
	}
}
