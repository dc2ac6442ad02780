package agents_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/agents"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Contract: GET /cb/api/agents lists the user's grants: client, verified
// host, approval and expiry, last use to the minute, caps, the boxes each
// created; new until POST /cb/api/agents/seen, the home page naming them
// meanwhile.
func TestTheAgentsPageListsTheGrantsAndMarksThemSeen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice, bob := e.signIn("alice"), e.signIn("bob")
	_, codex := alice.grant("codex", 2, 1)
	_, claude := alice.grant("claude", 3, 2)
	box := e.box(e.alice.ID, "agent", "running", codex.ID)
	e.box(e.alice.ID, "main", "running", "")

	list := alice.agents()
	if len(list) != 2 || list[0].ID != claude.ID || list[1].ID != codex.ID {
		t.Fatalf("alice's agents: %+v, want claude then codex (newest first)", list)
	}
	c := list[1]
	if c.ClientName != "codex" || c.VerifiedHost != "" || c.MaxBoxes != 2 || c.MaxRunning != 1 || !c.New {
		t.Errorf("codex: %+v", c)
	}
	if d := c.ExpiresAt.Sub(c.ApprovedAt); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
		t.Errorf("codex approved %v, expires %v: want 7 days apart", c.ApprovedAt, c.ExpiresAt)
	}
	if c.LastUsedAt == nil || !c.LastUsedAt.Equal(c.LastUsedAt.Truncate(time.Minute)) || time.Since(*c.LastUsedAt) > 2*time.Minute {
		t.Errorf("codex last used %v: want its token's issue, to the minute", c.LastUsedAt)
	}
	if len(c.Boxes) != 1 || c.Boxes[0] != (agents.Box{BoxID: box, Name: "agent", State: "running"}) {
		t.Errorf("codex's boxes %+v, want only the one it created", c.Boxes)
	}
	if len(list[0].Boxes) != 0 {
		t.Errorf("claude's boxes %+v, want none", list[0].Boxes)
	}
	if got := bob.agents(); len(got) != 0 {
		t.Fatalf("bob's agents: %+v, want none (alice's are hers)", got)
	}

	const notice = "2 new agents can use your account: codex, claude."
	if _, home := alice.do("GET", "/cb/", "", ""); !strings.Contains(home, notice) || !strings.Contains(home, `href="/cb/agents"`) {
		t.Fatalf("alice's home page has no notice %q:\n%s", notice, home)
	}
	if _, home := bob.do("GET", "/cb/", "", ""); strings.Contains(home, "new agent") {
		t.Fatalf("bob's home page names alice's agents:\n%s", home)
	}
	// JSON only: a form another page of this host could send changes nothing.
	if code, _ := alice.do("POST", "/cb/api/agents/seen", "application/x-www-form-urlencoded", "x=1"); code != 415 {
		t.Fatalf("seen as a form: %d, want 415", code)
	}
	if code, _ := alice.do("POST", "/cb/api/agents/seen", "application/json", `{"x": 1}`); code != 400 {
		t.Fatalf("seen with a field: %d, want 400", code)
	}
	if list := alice.agents(); !list[0].New || !list[1].New {
		t.Fatal("a refused seen marked the agents seen")
	}
	if code, body := alice.do("POST", "/cb/api/agents/seen", "application/json", "{}"); code != 204 {
		t.Fatalf("seen: %d %s", code, body)
	}
	if list := alice.agents(); list[0].New || list[1].New {
		t.Fatalf("after seen: %+v, want none new", list)
	}
	if _, home := alice.do("GET", "/cb/", "", ""); strings.Contains(home, "new agent") {
		t.Fatalf("the home page still has the notice after seen:\n%s", home)
	}
	_, copilot := alice.grant("copilot", 1, 1)
	if _, home := alice.do("GET", "/cb/", "", ""); !strings.Contains(home, "A new agent can use your account: copilot.") {
		t.Fatalf("a grant after seen is not new on the home page:\n%s", home)
	}
	if list := alice.agents(); !list[0].New || list[0].ID != copilot.ID || list[1].New {
		t.Fatalf("after a third grant: %+v, want only copilot new", list)
	}
}

// Contract: DELETE /cb/api/agents/{id} revokes the grant: its tokens stop
// at once on this api and on every other (a second index on the same
// database, as a replica), its open exchanges end (Done), its boxes stay
// the user's. Bad input: another user's grant (404, the grant untouched),
// a malformed id (400), one already revoked (404), no session (401).
func TestRevokingAnAgentStopsItEverywhereAndKeepsItsBoxes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	alice, bob := e.signIn("alice"), e.signIn("bob")
	token, g := alice.grant("codex", 2, 1)
	other, _ := alice.grant("claude", 2, 1)
	box := e.box(e.alice.ID, "agent", "running", g.ID)
	replica := oauth.NewGrants(e.db.Pool, e.db.URL, slog.New(slog.DiscardHandler))
	if err := replica.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replica.Stop)
	onReplica, err := replica.Check(token)
	if err != nil {
		t.Fatalf("the token on the replica before the revoke: %v", err)
	}

	for _, c := range []struct {
		who  *session
		id   string
		want int
	}{
		{bob, g.ID, 404}, // another user's grant
		{alice, "cbg_" + strings.Repeat("0", 24), 404},    // none
		{alice, "cbg_XYZ", 400},                           // malformed
		{alice, "cbg_" + strings.Repeat("a", 25), 400},    // too long
		{alice, "%2e%2e%2fcb%2fapi%2fagents%2fseen", 400}, // not an id at all
	} {
		if code, body := c.who.do("DELETE", "/cb/api/agents/"+c.id, "", ""); code != c.want {
			t.Errorf("DELETE /cb/api/agents/%s: %d %s, want %d", c.id, code, body, c.want)
		}
	}
	if _, err := e.grants.Check(token); err != nil {
		t.Fatalf("a refused DELETE ended the grant: %v", err)
	}
	anon := &session{e: e, b: e.api.Browser()} // no cookie
	if code, _ := anon.do("DELETE", "/cb/api/agents/"+g.ID, "", ""); code != 401 {
		t.Fatalf("DELETE without a session: %d, want 401", code)
	}

	if code, body := alice.do("DELETE", "/cb/api/agents/"+g.ID, "", ""); code != 204 {
		t.Fatalf("DELETE alice's grant: %d %s", code, body)
	}
	if _, err := e.grants.Check(token); !errors.Is(err, oauth.ErrBadToken) {
		t.Fatalf("the token right after the revoke on this api: %v, want ErrBadToken", err)
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("the grant's open calls on this api did not end with the revoke")
	}
	wait.Eventually(t, 10*time.Second, "the replica drops the revoked grant", func() (bool, string) {
		_, err := replica.Check(token)
		return errors.Is(err, oauth.ErrBadToken), fmt.Sprint(err)
	})
	<-onReplica.Done()
	if _, err := e.grants.Check(other); err != nil {
		t.Fatalf("alice's other agent stopped too: %v", err)
	}
	if code, _ := alice.do("DELETE", "/cb/api/agents/"+g.ID, "", ""); code != 404 {
		t.Fatalf("DELETE of a revoked grant: %d, want 404", code)
	}
	var owner string
	var agent bool
	if err := e.db.Pool.QueryRow(ctx, `SELECT user_id::text, agent FROM boxes WHERE id = $1`, box).Scan(&owner, &agent); err != nil || owner != e.alice.ID || !agent {
		t.Fatalf("the revoked grant's box: owner %q agent %v (%v), want alice's agent box", owner, agent, err)
	}
	if list := alice.agents(); len(list) != 1 || list[0].ClientName != "claude" {
		t.Fatalf("alice's agents after the revoke: %+v, want claude alone", list)
	}
}

// Contract: sign out everywhere ends every grant too (EndAll in its
// transaction): every token of each stops on every api.
func TestEndAllEndsEveryGrantOfTheUserOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	alice, bob := e.signIn("alice"), e.signIn("bob")
	a1, _ := alice.grant("codex", 2, 1)
	a2, _ := alice.grant("claude", 2, 1)
	b1, _ := bob.grant("codex", 2, 1)
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := agents.EndAll(ctx, tx, e.alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.grants.Check(a1); err != nil {
		t.Fatalf("a grant ended before the transaction committed: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{a1, a2} {
		wait.Eventually(t, 10*time.Second, "alice's agent stops", func() (bool, string) {
			_, err := e.grants.Check(tok)
			return errors.Is(err, oauth.ErrBadToken), fmt.Sprint(err)
		})
	}
	if _, err := e.grants.Check(b1); err != nil {
		t.Fatalf("bob's agent stopped with alice's sign out everywhere: %v", err)
	}
	if list := alice.agents(); len(list) != 0 {
		t.Fatalf("alice's agents after EndAll: %+v", list)
	}
}
