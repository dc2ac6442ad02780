package signup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Two apis on one PostgreSQL, each admitting at once (arrivals split
// between them, each running admission, and extra passes beside), never
// fill more than the seats: the settings row's lock makes each see the
// accounts the other made. Run as 50 rounds, each with its own seats.
func TestTwoApisAdmittingAtOnceNeverExceedTheSeats(t *testing.T) {
	e := newQueueEnv(t)
	pool, err := pgxpool.New(e.ctx, e.db.URL) // the second api's own pool
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other := newSignup(pool, e.users)
	apis := []*Signup{e.s, other}
	if _, err := e.users.Add(e.ctx, "early", "correct horse", false); err != nil {
		t.Fatal(err) // an admin-made account holds a seat too
	}
	if _, err := e.users.Add(e.ctx, "boss", "correct horse", true); err != nil {
		t.Fatal(err) // an admin holds none
	}
	const people = 12
	for round := 0; round < 50; round++ {
		seats := 2 + round%6
		e.exec("DELETE FROM users WHERE idp = 'github'")
		e.exec("DELETE FROM signup_queue")
		e.exec("DELETE FROM signup_admissions")
		e.open(seats, 1000)
		outs := make([]Outcome, people)
		errs := make([]error, people)
		var wg sync.WaitGroup
		for i := 0; i < people; i++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = apis[i%2].Arrive(context.Background(), person(round*100+i))
			}()
			go func() {
				defer wg.Done()
				apis[(i+1)%2].Admit(context.Background())
			}()
		}
		wg.Wait()
		admitted := 0
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: arrival %d: %v", round, i, err)
			}
			if outs[i].UserID != "" {
				admitted++
			}
		}
		// The arrivals that were queued may have been admitted by a later
		// pass; the accounts are what counts.
		if used := e.seatsUsed(); used != seats {
			t.Fatalf("round %d: %d seats used of %d (admitted arrivals %d)", round, used, seats, admitted)
		}
		if got := e.count("SELECT count(*) FROM signup_queue WHERE status = 'admitted'"); got != seats-1 {
			t.Fatalf("round %d: %d admitted entries, want %d", round, got, seats-1)
		}
		if admitted > seats-1 {
			t.Fatalf("round %d: %d arrivals told admitted, seats for %d", round, admitted, seats-1)
		}
	}
}

// The hourly brake: with seats free, at most hourly_accounts are admitted
// in an hour; an account deleted within the hour does not give its place
// back; an hour later the rest come in.
func TestTheHourlyBrakeHoldsTheRestUntilTheHourPasses(t *testing.T) {
	e := newQueueEnv(t)
	e.open(100, 3)
	for i := 0; i < 5; i++ {
		e.arrive(person(i))
	}
	if n := e.seatsUsed(); n != 3 {
		t.Fatalf("%d admitted under a brake of 3 an hour", n)
	}
	var first string
	if err := e.db.Pool.QueryRow(e.ctx, "SELECT name FROM users WHERE idp = 'github' ORDER BY created_at LIMIT 1").Scan(&first); err != nil {
		t.Fatal(err)
	}
	if err := e.users.Delete(e.ctx, first); err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.Admit(e.ctx); err != nil || len(got) != 0 {
		t.Fatalf("after a delete within the hour: admitted %v, %v; want none", got, err)
	}
	e.exec("UPDATE signup_admissions SET admitted_at = admitted_at - interval '61 minutes'")
	got, err := e.s.Admit(e.ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("an hour later: admitted %v, %v; want the 2 left", got, err)
	}
	if n := e.count("SELECT count(*) FROM signup_queue WHERE status = 'waiting'"); n != 0 {
		t.Fatalf("%d still waiting", n)
	}
}

// Each person is admitted in a savepoint: one whose account cannot be made
// (its GitHub identity is already linked to another account) stays
// waiting, with no account, and the people after it are admitted.
func TestAFailureOfOnePersonLeavesTheOthersAdmitted(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, e.arrive(person(i)).QueueID)
	}
	owner, err := e.users.Add(e.ctx, "owner", "correct horse", false)
	if err != nil {
		t.Fatal(err)
	}
	bad := person(1)
	e.exec("INSERT INTO identities (idp, subject, user_id, email, email_verified) VALUES ('github', $1, $2, 'x@example.com', true)", bad.Subject, owner.ID)
	e.exec("UPDATE signup_settings SET seats = 10")
	got, err := e.s.Admit(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != ids[0] || got[1] != ids[2] {
		t.Fatalf("admitted %v; want %s and %s", got, ids[0], ids[2])
	}
	if n := e.count("SELECT count(*) FROM users WHERE id = $1", ids[1]); n != 0 {
		t.Fatalf("the failed person's account was kept")
	}
	if n := e.count("SELECT count(*) FROM signup_queue WHERE id = $1 AND status = 'waiting'", ids[1]); n != 1 {
		t.Fatalf("the failed person is no longer waiting")
	}
	// The hook fails a person the same way, to show the savepoint, not
	// the identity check, keeps the others.
	e.exec("DELETE FROM identities WHERE user_id = $1", owner.ID)
	e.s.beforeAccount = func(string) error { return errors.New("no") }
	if got, err := e.s.Admit(e.ctx); err != nil || len(got) != 0 {
		t.Fatalf("with every account failing: %v, %v", got, err)
	}
	e.s.beforeAccount = nil
	if got, err := e.s.Admit(e.ctx); err != nil || len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("after the failure went: %v, %v", got, err)
	}
}

// The account's id is the queue entry's: an account a failed attempt made
// (the row there, the entry still waiting) is taken up by the retry, not
// made twice, and keeps its name.
func TestARetryReusesTheAccountAFailedAttemptMade(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	id := e.arrive(person(7)).QueueID
	e.exec("INSERT INTO users (id, name, idp) VALUES ($1, 'person7', 'github')", id)
	e.exec("UPDATE signup_settings SET seats = 10")
	got, err := e.s.Admit(e.ctx)
	if err != nil || len(got) != 1 || got[0] != id {
		t.Fatalf("admitted %v, %v; want %s", got, err, id)
	}
	if n := e.count("SELECT count(*) FROM users WHERE idp = 'github'"); n != 1 {
		t.Fatalf("%d accounts; want the one", n)
	}
	out := e.arrive(person(7))
	if out.UserID != id {
		t.Fatalf("the person's next sign-in: %+v; want user %s", out, id)
	}
	if n := e.count("SELECT count(*) FROM identities WHERE user_id = $1", id); n != 1 {
		t.Fatalf("the identity is not linked")
	}
}

// Admission runs past its caller's cancel: a pass whose caller has gone
// still admits.
func TestAdmissionRunsPastTheCallersCancel(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	e.arrive(person(1))
	e.exec("UPDATE signup_settings SET seats = 10")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := e.s.Admit(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("Admit on a cancelled context: %v, %v", got, err)
	}
}

// The oldest waiting people go first, those at the front (an invite, an
// admin's front) before them.
func TestAdmissionTakesTheFrontThenTheOldest(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	e.exec("UPDATE signup_settings SET invite_only = false")
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, e.arrive(person(i)).QueueID)
	}
	inv, err := e.s.CreateInvite(e.ctx, "", "", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	withInvite := person(9)
	withInvite.Invite = inv.Code
	late := e.arrive(withInvite).QueueID
	e.exec("UPDATE signup_queue SET front = true WHERE id = $1", ids[2])
	for want, id := range []string{ids[2], late, ids[0], ids[1], ids[3]} {
		e.exec("UPDATE signup_settings SET seats = $1", want+1)
		got, err := e.s.Admit(e.ctx)
		if err != nil || len(got) != 1 || got[0] != id {
			t.Fatalf("pass %d admitted %v, %v; want %s", want, got, err, id)
		}
	}
}

// User names come from the GitHub login, lowercased and cleaned to the
// grammar, -2, -3 on a clash (cut to fit 39); a login that cleans to
// nothing or to a reserved name becomes gh-<id>.
func TestUserNamesFromGitHubLogins(t *testing.T) {
	for login, want := range map[string]string{
		"Octo-Cat": "octo-cat", "-x_Y.z": "x_y-z", "---": "gh-42", "Ünï": "n", "ADMIN": "gh-42", "root": "gh-42",
		"a234567890123456789012345678901234567890": "a2345678901234567890123456789012345",
	} {
		if got := baseName(login, "42"); got != want {
			t.Errorf("baseName(%q) = %q; want %q", login, got, want)
		}
	}
	e := newQueueEnv(t)
	e.open(100, 100)
	long := "b234567890123456789012345678901234567890"
	for i, login := range []string{"Octo", "octo", "OCTO", long, long, "...", "Admin"} {
		a := person(i)
		a.Login = login
		e.arrive(a)
	}
	for _, name := range []string{"octo", "octo-2", "octo-3", long[:35], long[:35] + "-2", "gh-1005", "gh-1006"} {
		if n := e.count("SELECT count(*) FROM users WHERE name = $1 AND idp = 'github'", name); n != 1 {
			t.Errorf("no account named %q", name)
		}
	}
}

// Every refusal code Arrive answers, each reached.
func TestArriveRefusesWithEachLoginErrorCode(t *testing.T) {
	e := newQueueEnv(t)
	check := func(what string, a Arrival, want string) {
		t.Helper()
		if out := e.arrive(a); out.Refusal != want {
			t.Errorf("%s: %+v; want %s", what, out, want)
		}
	}
	check("signup off (the default)", person(1), RefuseClosed)
	e.exec("UPDATE signup_settings SET enabled = true, seats = 10")
	unverified := person(2)
	unverified.EmailVerified = false
	check("an unverified email", unverified, RefuseUnverified)
	check("invite-only (the default) without an invite", person(3), RefuseInviteMissing)
	e.exec("UPDATE signup_settings SET invite_only = false, allow_domains = '{example.org}', allow_emails = '{p4@example.com}'")
	check("outside the allowlist", person(3), RefuseNotAllowed)
	if out := e.arrive(person(4)); out.UserID == "" {
		t.Errorf("an allowed email: %+v", out)
	}
	e.exec("UPDATE signup_settings SET allow_domains = '{}', allow_emails = '{}', seats = 0")
	q := e.arrive(person(5)).QueueID
	e.exec("UPDATE signup_queue SET status = 'rejected' WHERE id = $1", q)
	check("rejected by an admin", person(5), RefuseDeclined)
	if n := e.count("SELECT count(*) FROM signup_queue WHERE subject IN ('1001', '1002', '1003')"); n != 0 {
		t.Errorf("%d refused arrivals joined the queue", n)
	}
}

// An invite that is malformed, unknown, revoked, used up or expired is no
// invite: invite-only refuses it (invite_required), and a good one joins
// at the front. A refused arrival takes no use.
func TestBadInviteCodesAreRefused(t *testing.T) {
	e := newQueueEnv(t)
	e.exec("UPDATE signup_settings SET enabled = true, seats = 0")
	mk := func(uses int) NewInvite {
		inv, err := e.s.CreateInvite(e.ctx, "", "", uses, 1)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	revoked, usedUp, expired, good := mk(1), mk(1), mk(1), mk(2)
	if err := e.s.RevokeInvite(e.ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	e.exec("UPDATE invites SET used = 1 WHERE id = $1", usedUp.ID)
	e.exec("UPDATE invites SET expires_at = now() - interval '1 second' WHERE id = $1", expired.ID)
	for i, code := range []string{"cbi_1234", "CBI_" + good.Code[4:], strings.ToUpper(good.Code), good.Code + "0",
		"cbi_" + fmt.Sprintf("%064x", 7), revoked.Code, usedUp.Code, expired.Code} {
		a := person(i)
		a.Invite = code
		if out := e.arrive(a); out.Refusal != RefuseInviteMissing {
			t.Errorf("invite %d (%.12s…): %+v; want invite_required", i, code, out)
		}
	}
	unverified := person(20)
	unverified.EmailVerified, unverified.Invite = false, good.Code
	e.arrive(unverified)
	if n := e.count("SELECT used FROM invites WHERE id = $1", good.ID); n != 0 {
		t.Fatalf("a refused arrival took a use: used %d", n)
	}
	a := person(21)
	a.Invite = good.Code
	if out := e.arrive(a); out.QueueID == "" {
		t.Fatalf("a good invite: %+v", out)
	}
	if n := e.count("SELECT count(*) FROM signup_queue WHERE subject = $1 AND front", a.Subject); n != 1 {
		t.Fatalf("the invited person is not at the front")
	}
}

// breaker: admission read the waiting people without locking them, so an
// admin's reject (or a leave) committed between that read and the
// account answered 200 "rejected" while admission went on to make the
// account and mark the entry admitted over it. Admission now holds the
// rows it admits: the reject waits for its commit and is told the entry
// is admitted (409), so what the admin is told is what happened.
func TestARejectDuringAdmissionIsNotOverwritten(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	q := e.arrive(person(1)).QueueID
	e.exec("UPDATE signup_settings SET seats = 1")
	rejected := make(chan error, 1)
	e.s.beforeAccount = func(id string) error {
		if id != q {
			return nil
		}
		go func() {
			rejected <- e.s.setEntry(context.Background(), q, "UPDATE signup_queue SET status = 'rejected', front = false WHERE id::text = $1 AND status <> 'admitted'")
		}()
		// The reject is done, or waits on admission's lock.
		wait.Eventually(t, 30*time.Second, "the reject to run or wait on a lock", func() (bool, string) {
			if len(rejected) == 1 {
				return true, "done"
			}
			n := e.count(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE signup_queue SET status = ''rejected''%'`)
			return n == 1, fmt.Sprintf("%d waiting", n)
		})
		return nil
	}
	if _, err := e.s.Admit(e.ctx); err != nil {
		t.Fatal(err)
	}
	err := <-rejected
	var status string
	if err := e.db.Pool.QueryRow(e.ctx, "SELECT status FROM signup_queue WHERE id = $1", q).Scan(&status); err != nil {
		t.Fatal(err)
	}
	accounts := e.count("SELECT count(*) FROM users WHERE id = $1", q)
	switch {
	case err == nil && (status != "rejected" || accounts != 0):
		t.Fatalf("the reject answered success, yet the entry is %s with %d account", status, accounts)
	case err != nil && !errors.Is(err, ErrAdmitted):
		t.Fatalf("the reject: %v", err)
	case err != nil && (status != "admitted" || accounts != 1):
		t.Fatalf("the reject told admitted, yet the entry is %s with %d account", status, accounts)
	}
}
