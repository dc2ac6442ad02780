package signup_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/signup"
)

// The settings: admins only; a PUT with an unknown key is 400 naming every
// one, a value out of range 400 naming the key, and neither changes
// anything; a good PUT keeps the keys it does not give.
func TestSignupSettingsAreAdminsOnlyAndCheckKeysAndRanges(t *testing.T) {
	e := newQueueEnv(t)
	e.client().want(401, "GET", "/cb/api/signup", nil, nil)
	user, _ := e.signIn("alice", false)
	user.want(403, "GET", "/cb/api/signup", nil, nil)
	user.want(403, "PUT", "/cb/api/signup", map[string]any{"enabled": true}, nil)
	admin, _ := e.signIn("boss", true)
	var set signup.Settings
	admin.want(200, "GET", "/cb/api/signup", nil, &set)
	if set.Enabled || !set.InviteOnly || set.DailyCapMicros != 1_000_000 || set.MaxAgentBoxes != 1 || set.HourlyAccounts != 50 {
		t.Fatalf("the defaults: %+v", set)
	}
	if out := admin.want(400, "PUT", "/cb/api/signup", map[string]any{"enabled": true, "seat": 3, "admins": 1}, nil); !contains(out, `\"admins\"`, `\"seat\"`) {
		t.Errorf("unknown keys: %s", out)
	}
	for _, kv := range []struct {
		key string
		v   any
	}{{"seats", -1}, {"seats", signup.MaxSeats + 1}, {"hourly_accounts", 0}, {"hourly_accounts", signup.MaxHourlyAccounts + 1},
		{"daily_cap_micros", 0}, {"daily_cap_micros", signup.MaxDailyCapMicros + 1}, {"max_agent_boxes", 0}, {"max_agent_boxes", 65},
		{"enabled", "yes"}, {"seats", 1.5}, {"allow_domains", []string{"not a domain"}}, {"allow_emails", []string{"nobody"}}, {"seats", nil}} {
		key, v := kv.key, kv.v
		body := map[string]any{key: v, "invite_only": false}
		out := admin.want(400, "PUT", "/cb/api/signup", body, nil)
		if !contains(out, key) {
			t.Errorf("%s = %v: %s does not name the key", key, v, out)
		}
	}
	admin.want(400, "PUT", "/cb/api/signup", "[1]", nil)
	admin.want(200, "GET", "/cb/api/signup", nil, &set)
	if set.Enabled || !set.InviteOnly {
		t.Fatalf("a refused PUT changed the settings: %+v", set)
	}
	admin.want(200, "PUT", "/cb/api/signup", map[string]any{"enabled": true, "seats": 5, "allow_domains": []string{"Example.COM", "example.com"}}, &set)
	if !set.Enabled || set.Seats != 5 || !set.InviteOnly || len(set.AllowDomains) != 1 || set.AllowDomains[0] != "example.com" {
		t.Fatalf("after a PUT: %+v", set)
	}
}

// A settings change runs admission: seats given, the waiting come in.
func TestASettingsChangeAdmits(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	q := e.arrive(person(1)).QueueID
	admin, _ := e.signIn("boss", true)
	admin.want(200, "PUT", "/cb/api/signup", map[string]any{"seats": 1}, nil)
	if n := e.count("SELECT count(*) FROM users WHERE id = $1", q); n != 1 {
		t.Fatal("the settings change admitted no one")
	}
}

// The admin's queue: list, front, reject (then declined), admit past the
// cap; an unknown entry is 404, an admitted one 409.
func TestAdminsActOnTheQueue(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	a, b, c := e.arrive(person(1)).QueueID, e.arrive(person(2)).QueueID, e.arrive(person(3)).QueueID
	admin, _ := e.signIn("boss", true)
	var l struct {
		Entries []signup.QueueEntry `json:"entries"`
	}
	admin.want(200, "GET", "/cb/api/queue", nil, &l)
	if len(l.Entries) != 3 || l.Entries[0].ID != a || l.Entries[0].Position != 1 || l.Entries[2].Position != 3 {
		t.Fatalf("the queue: %+v", l)
	}
	var got signup.QueueEntry
	admin.want(200, "POST", "/cb/api/queue/"+c+"/front", map[string]any{}, &got)
	if !got.Front || got.Position != 1 {
		t.Fatalf("after front: %+v", got)
	}
	admin.want(200, "POST", "/cb/api/queue/"+b+"/reject", map[string]any{}, &got)
	if got.Status != "rejected" {
		t.Fatalf("after reject: %+v", got)
	}
	if out := e.arrive(person(2)); out.Refusal != signup.RefuseDeclined {
		t.Fatalf("a rejected person signing in again: %+v", out)
	}
	admin.want(200, "POST", "/cb/api/queue/"+a+"/admit", map[string]any{}, &got)
	if got.Status != "admitted" || got.UserID != a {
		t.Fatalf("after admit: %+v", got)
	}
	if out := e.arrive(person(1)); out.UserID != a {
		t.Fatalf("the admitted person's sign-in: %+v", out)
	}
	admin.want(409, "POST", "/cb/api/queue/"+a+"/admit", map[string]any{}, nil)
	admin.want(409, "POST", "/cb/api/queue/"+a+"/reject", map[string]any{}, nil)
	admin.want(404, "POST", "/cb/api/queue/00000000-0000-4000-8000-000000000000/admit", map[string]any{}, nil)
	admin.want(404, "POST", "/cb/api/queue/"+a+"/promote", map[string]any{}, nil)
	admin.want(415, "POST", "/cb/api/queue/"+c+"/admit", nil, nil)
	user, _ := e.signIn("alice", false)
	user.want(403, "POST", "/cb/api/queue/"+c+"/admit", map[string]any{}, nil)
	user.want(403, "GET", "/cb/api/queue", nil, nil)
}

// Invites: uses 1..1000 and days 1..90, the code once (cbi_ + 64 hex,
// only its SHA-256 kept) with its link; the list never shows a code;
// DELETE revokes.
func TestInvitesMadeListedAndRevoked(t *testing.T) {
	e := newQueueEnv(t)
	admin, _ := e.signIn("boss", true)
	for _, body := range []map[string]any{{"uses": 0}, {"uses": 1001}, {"days": 0}, {"days": 91}, {"uses": -1, "days": 5}} {
		admin.want(400, "POST", "/cb/api/invites", body, nil)
	}
	var inv signup.NewInvite
	admin.want(201, "POST", "/cb/api/invites", map[string]any{"uses": 1000, "days": 90}, &inv)
	if !strings.HasPrefix(inv.Code, "cbi_") || len(inv.Code) != 68 || inv.Link != "/cb/?invite="+inv.Code || inv.Uses != 1000 || inv.CreatedBy != "boss" {
		t.Fatalf("the invite: %+v", inv)
	}
	if d := time.Until(inv.ExpiresAt); d < 89*24*time.Hour || d > 91*24*time.Hour {
		t.Fatalf("expires in %v", d)
	}
	if n := e.count("SELECT count(*) FROM invites WHERE code_sha256 = sha256(convert_to($1, 'UTF8'))", inv.Code); n != 1 {
		t.Fatal("the code's SHA-256 is not what is kept")
	}
	out := admin.want(200, "GET", "/cb/api/invites", nil, nil)
	if strings.Contains(string(out), inv.Code[4:]) || !contains(out, inv.ID, `"live"`) {
		t.Fatalf("the list: %s", out)
	}
	admin.want(204, "DELETE", "/cb/api/invites/"+inv.ID, nil, nil)
	admin.want(404, "DELETE", "/cb/api/invites/00000000-0000-4000-8000-000000000000", nil, nil)
	admin.want(404, "DELETE", "/cb/api/invites/nope", nil, nil)
	if out := admin.want(200, "GET", "/cb/api/invites", nil, nil); !contains(out, `"revoked"`) {
		t.Fatalf("after the revoke: %s", out)
	}
	user, _ := e.signIn("alice", false)
	user.want(403, "POST", "/cb/api/invites", map[string]any{}, nil)
	user.want(403, "GET", "/cb/api/invites", nil, nil)
}

// Invite-scoped tokens: minted once by an admin; they reach POST /cb/api/invites
// (one use, days 1 to 7, default 2) and GET /cb/api/invites (their own), and
// every other route answers 403 before its handler (the whole mux); a
// revoked token, or one whose admin is no longer an enabled admin, is 401.
func TestInviteScopedTokensReachOnlyTheInviteRoutes(t *testing.T) {
	e := newQueueEnv(t)
	admin, boss := e.signIn("boss", true)
	admin.want(400, "POST", "/cb/api/invite-tokens", map[string]any{"label": ""}, nil)
	admin.want(400, "POST", "/cb/api/invite-tokens", map[string]any{"label": strings.Repeat("x", 101)}, nil)
	admin.want(400, "POST", "/cb/api/invite-tokens", map[string]any{"label": "a\nb"}, nil)
	var tok signup.NewInviteToken
	admin.want(201, "POST", "/cb/api/invite-tokens", map[string]any{"label": "the bot"}, &tok)
	if !strings.HasPrefix(tok.Token, "cbit_") || len(tok.Token) != signup.TokenLen || !tok.Alive {
		t.Fatalf("the token: %+v", tok)
	}
	admin.want(201, "POST", "/cb/api/invites", map[string]any{"uses": 5, "days": 30}, nil) // the admin's own

	bot := e.client()
	bot.bearer = tok.Token
	var inv signup.NewInvite
	bot.want(201, "POST", "/cb/api/invites", map[string]any{}, &inv)
	if inv.Uses != 1 || inv.TokenID != tok.ID || inv.CreatedBy != "boss" {
		t.Fatalf("the token's invite: %+v", inv)
	}
	if d := time.Until(inv.ExpiresAt); d < 47*time.Hour || d > 49*time.Hour {
		t.Fatalf("the default days: expires in %v", d)
	}
	bot.want(201, "POST", "/cb/api/invites", map[string]any{"uses": 1, "days": 7}, nil)
	for _, body := range []map[string]any{{"uses": 2}, {"uses": 0}, {"days": 8}, {"days": 0}, {"days": 90}} {
		bot.want(400, "POST", "/cb/api/invites", body, nil)
	}
	var list struct{ Invites []signup.Invite }
	bot.want(200, "GET", "/cb/api/invites", nil, &list)
	if len(list.Invites) != 2 {
		t.Fatalf("the token's list: %+v", list)
	}
	for _, i := range list.Invites {
		if i.TokenID != tok.ID {
			t.Fatalf("the token sees another's invite: %+v", i)
		}
	}
	// With a session beside it, the token still reaches nothing else.
	admin.bearer = tok.Token
	for _, r := range [][2]string{{"GET", "/cb/api/signup"}, {"PUT", "/cb/api/signup"}, {"GET", "/cb/api/queue"}, {"POST", "/cb/api/queue/x/admit"},
		{"DELETE", "/cb/api/invites/" + inv.ID}, {"GET", "/cb/api/invites/"}, {"POST", "/cb/api/invite-tokens"}, {"GET", "/cb/api/invite-tokens"},
		{"DELETE", "/cb/api/invite-tokens/" + tok.ID}, {"GET", "/cb/api/users"}, {"PATCH", "/cb/api/users/" + boss.ID}, {"GET", "/cb/admin"},
		{"GET", "/cb/queue"}, {"GET", "/cb/api/queue/me"}, {"DELETE", "/cb/api/queue/me"}, {"POST", "/cb/api/me/delete"}, {"GET", "/cb/"},
		{"GET", "/cb/api/me"}, {"POST", "/cb/api/me/token"}, {"POST", "/cb/api/session"}, {"DELETE", "/cb/api/session"}, {"GET", "/healthz"},
		{"PUT", "/cb/api/invites"}, {"DELETE", "/cb/api/invites"}, {"GET", "/nowhere"}, {"POST", "/cocoonbox.control.v1.Boxes/List"}} {
		got, out := admin.do(r[0], r[1], map[string]any{})
		if got != http.StatusForbidden || !contains(out, "invite_token") {
			t.Errorf("%s %s with a cbit_ token: %d %s; want 403", r[0], r[1], got, out)
		}
	}
	admin.bearer = ""
	if n := e.count("SELECT count(*) FROM invite_tokens WHERE revoked_at IS NULL"); n != 1 {
		t.Fatal("a refused route acted")
	}
	// Malformed and unknown tokens on the invite routes: 401.
	for _, bad := range []string{"cbit_", "cbit_" + strings.Repeat("0", 64), tok.Token[:signup.TokenLen-1], "cbit_" + strings.ToUpper(tok.Token[5:])} {
		c := e.client()
		c.bearer = bad
		if got, _ := c.do("GET", "/cb/api/invites", nil); got != 401 {
			t.Errorf("token %.10s…: %d; want 401", bad, got)
		}
	}
	var toks struct{ Tokens []signup.InviteToken }
	admin.want(200, "GET", "/cb/api/invite-tokens", nil, &toks)
	if len(toks.Tokens) != 1 || toks.Tokens[0].Invites != 2 || len(toks.Tokens[0].InviteIDs) != 2 || toks.Tokens[0].InviteIDs[1] != inv.ID ||
		toks.Tokens[0].UsedAt == nil || toks.Tokens[0].Label != "the bot" {
		t.Fatalf("the tokens: %+v", toks)
	}
	// Alive while its admin is an enabled admin.
	if _, err := e.users.SetDisabled(e.ctx, "boss", true); err != nil {
		t.Fatal(err)
	}
	bot.want(401, "GET", "/cb/api/invites", nil, nil)
	if _, err := e.users.SetDisabled(e.ctx, "boss", false); err != nil {
		t.Fatal(err)
	}
	bot.want(200, "GET", "/cb/api/invites", nil, nil)
	e.exec("UPDATE users SET admin = false WHERE name = 'boss'")
	bot.want(401, "GET", "/cb/api/invites", nil, nil)
	e.exec("UPDATE users SET admin = true WHERE name = 'boss'")
	admin.want(204, "DELETE", "/cb/api/invite-tokens/"+tok.ID, nil, nil)
	bot.want(401, "POST", "/cb/api/invites", map[string]any{}, nil)
	admin.want(404, "DELETE", "/cb/api/invite-tokens/ivt_0000000000000000", nil, nil)
}

// PATCH /cb/api/users/{id} {max_agent_boxes}: 0 for no cap (NULL), 1 to 64;
// out of range 400, an unknown user 404, admins only.
func TestAdminsSetMaxAgentBoxes(t *testing.T) {
	e := newQueueEnv(t)
	admin, _ := e.signIn("boss", true)
	user, alice := e.signIn("alice", false)
	var u signup.AdminUser
	admin.want(200, "PATCH", "/cb/api/users/"+alice.ID, map[string]any{"max_agent_boxes": 5}, &u)
	if u.MaxAgentBoxes != 5 || e.count("SELECT max_agent_boxes FROM users WHERE id = $1", alice.ID) != 5 {
		t.Fatalf("after 5: %+v", u)
	}
	admin.want(200, "PATCH", "/cb/api/users/"+alice.ID, map[string]any{"max_agent_boxes": 0}, &u)
	if u.MaxAgentBoxes != 0 || e.count("SELECT count(*) FROM users WHERE id = $1 AND max_agent_boxes IS NULL", alice.ID) != 1 {
		t.Fatalf("0 is no cap: %+v", u)
	}
	for _, body := range []any{map[string]any{"max_agent_boxes": -1}, map[string]any{"max_agent_boxes": 65}, map[string]any{},
		map[string]any{"max_agent_boxes": 1, "max_boxes": 3}, map[string]any{"max_agent_boxes": "2"}} {
		admin.want(400, "PATCH", "/cb/api/users/"+alice.ID, body, nil)
	}
	admin.want(404, "PATCH", "/cb/api/users/00000000-0000-4000-8000-000000000000", map[string]any{"max_agent_boxes": 1}, nil)
	admin.want(404, "PATCH", "/cb/api/users/nope", map[string]any{"max_agent_boxes": 1}, nil)
	user.want(403, "PATCH", "/cb/api/users/"+alice.ID, map[string]any{"max_agent_boxes": 3}, nil)
}

// The queue's person: GET /cb/api/queue/me with the cb_queue cookie, and
// DELETE leaves (the entry gone, admission run, the cookie cleared).
func TestTheQueuedPersonSeesTheirPlaceAndLeaves(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	e.arrive(person(1))
	queued := e.arrive(person(2))
	q := queued.QueueID
	c := e.client()
	c.want(404, "GET", "/cb/api/queue/me", nil, nil)
	setQueueCookie(t, c, e.s, queued.QueueSecret)
	var st signup.QueueStatus
	c.want(200, "GET", "/cb/api/queue/me", nil, &st)
	if st.Status != "waiting" || st.Position != 2 || st.Waiting != 2 || st.Email != "p2@example.com" || time.Since(st.Since) > time.Minute {
		t.Fatalf("the status: %+v", st)
	}
	c.want(204, "DELETE", "/cb/api/queue/me", nil, nil)
	c.want(404, "GET", "/cb/api/queue/me", nil, nil)
	if n := e.count("SELECT count(*) FROM signup_queue WHERE id = $1", q); n != 0 {
		t.Fatal("the entry is still there")
	}
}

// Issue 41, Deliver 9, its Must show: the queue cookie after admission
// reads no email. cb_queue held the entry's id, which admission makes the
// account's id, and GET /cb/api/queue/me answered the admitted entry's
// email to any request whose cookie named it, with no session. Now the
// cookie is a secret of its own (only its SHA-256 kept), spent at
// admission: the person's own cookie answers {"status": "admitted"}
// alone, and a cookie naming the account's id (or any other value than a
// live secret) answers 404. The entry stays (it is the account's record),
// so leaving is 409.
func TestTheQueueCookieAfterAdmissionReadsNoEmail(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	queued := e.arrive(person(1))
	if queued.QueueID == "" || !regexp.MustCompile(`^`+signup.QueueSecretPrefix+`[0-9a-f]{64}$`).MatchString(queued.QueueSecret) ||
		strings.Contains(queued.QueueSecret, queued.QueueID) {
		t.Fatalf("queued %+v: want a cbq_ secret of its own", queued)
	}
	if n := e.count("SELECT count(*) FROM signup_queue_cookies WHERE sha256 = sha256($1::bytea)", []byte(queued.QueueSecret)); n != 1 {
		t.Fatal("the secret's SHA-256 is not what is kept")
	}
	mine := e.client()
	setQueueCookie(t, mine, e.s, queued.QueueSecret)
	var st signup.QueueStatus
	mine.want(200, "GET", "/cb/api/queue/me", nil, &st)
	if st.Status != "waiting" || st.Email != "p1@example.com" {
		t.Fatalf("the waiting person's own status: %+v", st)
	}

	e.exec("UPDATE signup_settings SET seats = 1")
	if _, err := e.s.Admit(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count("SELECT count(*) FROM users WHERE id = $1", queued.QueueID); n != 1 {
		t.Fatal("not admitted")
	}
	out := mine.want(200, "GET", "/cb/api/queue/me", nil, nil)
	if string(out) != `{"status":"admitted"}`+"\n" {
		t.Errorf("the admitted person's own cookie answers %s; want its status alone", out)
	}
	mine.want(409, "DELETE", "/cb/api/queue/me", nil, nil)
	for _, forged := range []string{queued.QueueID, signup.QueueSecretPrefix + strings.Repeat("0", 64)} {
		other := e.client()
		setQueueCookie(t, other, e.s, forged)
		if got, out := other.do("GET", "/cb/api/queue/me", nil); got != 404 || contains(out, "p1@example.com") {
			t.Errorf("a cb_queue cookie of %q: %d %s; want 404 and no email", forged, got, out)
		}
	}
}

// breaker: a rejected person deleted their entry with DELETE
// /cb/api/queue/me, and their next sign-in was a new arrival, queued
// again: the admin's reject undone. The entry stays (409 declined) and
// the next sign-in is declined.
func TestARejectedPersonCannotLeaveAndComeBack(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	queued := e.arrive(person(1))
	admin, _ := e.signIn("boss", true)
	admin.want(200, "POST", "/cb/api/queue/"+queued.QueueID+"/reject", map[string]any{}, nil)
	c := e.client()
	setQueueCookie(t, c, e.s, queued.QueueSecret)
	if got, out := c.do("DELETE", "/cb/api/queue/me", nil); got != 409 || !contains(out, `"declined"`) {
		t.Errorf("a rejected person's leave: %d %s; want 409 declined", got, out)
	}
	if out := e.arrive(person(1)); out.Refusal != signup.RefuseDeclined {
		t.Fatalf("the rejected person's next sign-in: %+v; want declined", out)
	}
}

// Self-delete: the caller's own name, the admin delete, the session ended,
// the next person admitted; a wrong name 400, an admin 403.
func TestSelfDeleteEndsTheAccountAndAdmitsTheNext(t *testing.T) {
	e := newQueueEnv(t)
	admin, _ := e.signIn("boss", true)
	user, alice := e.signIn("alice", false)
	e.open(1, 100)
	q := e.arrive(person(1)).QueueID
	if q == "" {
		t.Fatal("not queued")
	}
	admin.want(403, "POST", "/cb/api/me/delete", map[string]any{"name": "boss"}, nil)
	user.want(400, "POST", "/cb/api/me/delete", map[string]any{"name": "boss"}, nil)
	user.want(400, "POST", "/cb/api/me/delete", map[string]any{"name": "Alice"}, nil)
	user.want(415, "POST", "/cb/api/me/delete", nil, nil)
	e.client().want(401, "POST", "/cb/api/me/delete", map[string]any{"name": "alice"}, nil)
	user.want(204, "POST", "/cb/api/me/delete", map[string]any{"name": "alice"}, nil)
	if n := e.count("SELECT count(*) FROM users WHERE id = $1", alice.ID); n != 0 {
		t.Fatal("the account is still there")
	}
	user.want(401, "GET", "/cb/api/me", nil, nil)
	if n := e.count("SELECT count(*) FROM users WHERE id = $1", q); n != 1 {
		t.Fatal("the next person was not admitted")
	}
	admin.want(200, "GET", "/cb/api/me", nil, nil)
}

// breaker: an id PostgreSQL's text cannot hold (a NUL, bad UTF-8) in an
// admin route's path was a 500 from the database; it is no entry's,
// invite's, token's or user's: 404. And the console's sign-in with such a
// name was a 500; it is a wrong name: 401.
func TestAnIdOrNameTheDatabaseCannotHoldIsNotFoundNot500(t *testing.T) {
	e := newQueueEnv(t)
	admin, _ := e.signIn("boss", true)
	for _, bad := range []string{"%00", "%c3%28", "ivt_%00"} {
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/cb/api/queue/" + bad + "/admit", map[string]any{}},
			{"POST", "/cb/api/queue/" + bad + "/front", map[string]any{}},
			{"POST", "/cb/api/queue/" + bad + "/reject", map[string]any{}},
			{"DELETE", "/cb/api/invites/" + bad, nil},
			{"DELETE", "/cb/api/invite-tokens/" + bad, nil},
			{"PATCH", "/cb/api/users/" + bad, map[string]any{"max_agent_boxes": 1}},
		} {
			if got, out := admin.do(c.method, c.path, c.body); got != 404 {
				t.Errorf("%s %s: %d %s; want 404", c.method, c.path, got, out)
			}
		}
	}
	for _, name := range []string{"a\x00", "\x00"} {
		if got, out := e.client().do("POST", "/cb/api/session", map[string]string{"user": name, "password": "correct horse"}); got != 401 {
			t.Errorf("sign-in as %q: %d %s; want 401", name, got, out)
		}
	}
}
