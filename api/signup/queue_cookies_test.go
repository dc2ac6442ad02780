package signup_test

import (
	"testing"

	"github.com/cocoonbox/cocoonbox/api/signup"
)

// The cb_queue secrets are pruned (issue 41, Deliver 9): each sign-in
// that queued kept one more row of signup_queue_cookies and none was ever
// deleted, so a person signing in again and again grew the table without
// bound, and a secret past the cookie's 90 days still answered. Now an
// entry keeps its newest signup.QueueSecretsPerEntry, a secret past
// signup.QueueCookieTTL or spent signup.QueueSpentTTL ago answers 404 and
// goes at the next mint. Time is moved by back-dating the rows.
func TestQueueCookieSecretsArePrunedWhenSpentOrExpired(t *testing.T) {
	e := newQueueEnv(t)
	e.open(0, 100)
	statusOf := func(secret string) int {
		t.Helper()
		c := e.client()
		setQueueCookie(t, c, e.s, secret)
		got, _ := c.do("GET", "/cb/api/queue/me", nil)
		return got
	}
	rows := func(queueID string) int {
		t.Helper()
		return e.count("SELECT count(*) FROM signup_queue_cookies WHERE queue_id = $1", queueID)
	}

	// One person signing in from many browsers: the newest are kept.
	var secrets []string
	for range signup.QueueSecretsPerEntry + 3 {
		secrets = append(secrets, e.arrive(person(1)).QueueSecret)
	}
	p1 := e.queued(1001)
	if n := rows(p1); n != signup.QueueSecretsPerEntry {
		t.Errorf("after %d sign-ins the entry keeps %d secrets; want %d", len(secrets), n, signup.QueueSecretsPerEntry)
	}
	if got := statusOf(secrets[0]); got != 404 {
		t.Errorf("the oldest secret, dropped: %d; want 404", got)
	}
	if got := statusOf(secrets[len(secrets)-1]); got != 200 {
		t.Errorf("the newest secret: %d; want 200", got)
	}

	// A secret past the cookie's life answers nothing, and goes.
	expired := e.arrive(person(2)).QueueSecret
	p2 := e.queued(1002)
	e.exec("UPDATE signup_queue_cookies SET created_at = now() - make_interval(secs => $2) - interval '1 minute' WHERE queue_id = $1",
		p2, signup.QueueCookieTTL.Seconds())
	if got := statusOf(expired); got != 404 {
		t.Errorf("a secret past %v: %d; want 404", signup.QueueCookieTTL, got)
	}

	// A spent secret answers the status until QueueSpentTTL, then goes.
	admin, _ := e.signIn("boss", true)
	admin.want(200, "POST", "/cb/api/queue/"+p1+"/admit", map[string]any{}, nil)
	if got := statusOf(secrets[len(secrets)-1]); got != 200 {
		t.Errorf("a secret spent just now: %d; want 200 (its status)", got)
	}
	e.exec("UPDATE signup_queue_cookies SET spent_at = now() - make_interval(secs => $2) - interval '1 minute' WHERE queue_id = $1",
		p1, signup.QueueSpentTTL.Seconds())
	if got := statusOf(secrets[len(secrets)-1]); got != 404 {
		t.Errorf("a secret spent %v ago: %d; want 404", signup.QueueSpentTTL, got)
	}

	// The next sign-in that queues prunes both.
	fresh := e.arrive(person(3)).QueueSecret
	if n1, n2 := rows(p1), rows(p2); n1 != 0 || n2 != 0 {
		t.Errorf("after the next mint: %d spent and %d expired secrets kept; want none", n1, n2)
	}
	if got := statusOf(fresh); got != 200 {
		t.Errorf("the fresh secret: %d", got)
	}
	if n := e.count("SELECT count(*) FROM signup_queue_cookies"); n != 1 {
		t.Errorf("the table holds %d secrets; want the fresh one alone", n)
	}
}
