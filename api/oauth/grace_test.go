package oauth_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/oauth"
)

// clock is a test's clock of the api (apitest.WithClock).
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// agent is a registered client of a (dynamic registration) signed in as
// alice: its client_id and its first pair.
func agent(t *testing.T, a *apitest.API) (clientID, access, refresh string) {
	t.Helper()
	clientID, _ = register(t, a, `{"client_name":"four processes","redirect_uris":["http://127.0.0.1:1455/cb"]}`)
	pair := signIn(t, a, clientID)
	return clientID, pair["access_token"].(string), pair["refresh_token"].(string)
}

// register registers metadata (RFC 7591): the client_id and the answer.
func register(t *testing.T, a *apitest.API, metadata string) (string, map[string]any) {
	t.Helper()
	resp, text := a.Browser().Send("POST", oauth.RegistrationPath, "application/json", metadata)
	var reg map[string]any
	if resp.StatusCode != 201 || json.Unmarshal([]byte(text), &reg) != nil {
		t.Fatalf("register: %d %s", resp.StatusCode, text)
	}
	id, _ := reg["client_id"].(string)
	return id, reg
}

// signIn approves clientID's request as alice and exchanges the code:
// the token endpoint's answer.
func signIn(t *testing.T, a *apitest.API, clientID string) map[string]any {
	t.Helper()
	const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	q := url.Values{"client_id": {clientID}, "redirect_uri": {"http://127.0.0.1:1455/cb"}, "response_type": {"code"},
		"state": {"st4te"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}}
	body, _ := json.Marshal(map[string]string{"query": q.Encode()})
	resp, text := a.Session.Send("POST", "/cb/api/oauth/approve", "application/json", string(body))
	var approved struct{ Redirect string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &approved) != nil {
		t.Fatalf("approve: %d %s", resp.StatusCode, text)
	}
	cb, _ := url.Parse(approved.Redirect)
	status, pair := token(t, a, url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")},
		"client_id": {clientID}, "code_verifier": {verifier}})
	if status != 200 {
		t.Fatalf("exchange: %d %v", status, pair)
	}
	return pair
}

// token posts form to the token endpoint: its status and answer.
func token(t *testing.T, a *apitest.API, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, text := a.Browser().Send("POST", oauth.TokenPath, "application/x-www-form-urlencoded", form.Encode())
	var got map[string]any
	json.Unmarshal([]byte(text), &got)
	return resp.StatusCode, got
}

// Issue 41, Deliver 8, its Must show: four concurrent refreshes of one
// refresh token (agents sharing one credential across processes) leave
// the agent signed in: all four get the same working pair. Before the
// grace window one won and the other three, counted as replays, revoked
// the grant, the winner's new pair included. A replay after the window
// (RefreshGrace, on the api's injected clock) still revokes everything;
// another client within it gets nothing.
func TestFourConcurrentRefreshesLeaveTheAgentSignedIn(t *testing.T) {
	c := &clock{now: time.Now()}
	a := apitest.New(t, apitest.WithClock(c.Now))
	clientID, at, rt := agent(t, a)
	refresh := func(rt, client string) (int, map[string]any) {
		return token(t, a, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {client}})
	}

	type answer struct {
		status int
		got    map[string]any
	}
	answers := make([]answer, 4)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i].status, answers[i].got = refresh(rt, clientID) })
	}
	wg.Wait()
	first := answers[0].got
	for i, an := range answers {
		if an.status != 200 || an.got["access_token"] != first["access_token"] || an.got["refresh_token"] != first["refresh_token"] {
			t.Fatalf("refresh %d of 4: %d %v; want 200 and the pair all four share (first %v)", i, an.status, an.got, first)
		}
	}
	at2, rt2 := first["access_token"].(string), first["refresh_token"].(string)
	if at2 == at || rt2 == rt || !strings.HasPrefix(at2, oauth.AccessPrefix) {
		t.Fatalf("the shared pair %v is not a new one", first)
	}
	g, err := a.Grants.Check(at2)
	if err != nil {
		t.Fatalf("the shared access token after four refreshes: %v (the agent was signed out)", err)
	}

	// Another client presenting the token within the window gets no pair.
	if status, got := refresh(rt, "someone-else"); status != 400 || got["error"] != "invalid_grant" {
		t.Errorf("another client's replay within the window: %d %v", status, got)
	}
	// The shared refresh token works on (rotation goes on).
	c.advance(oauth.RefreshGrace - time.Second)
	if status, got := refresh(rt, clientID); status != 200 || got["refresh_token"] != rt2 {
		t.Fatalf("the same client just inside the window: %d %v; want the same pair", status, got)
	}
	status, got := refresh(rt2, clientID)
	if status != 200 {
		t.Fatalf("the shared refresh token: %d %v", status, got)
	}
	at3 := got["access_token"].(string)

	// Past the window, the first token again is a replay: the family ends.
	c.advance(2 * time.Second)
	if status, got := refresh(rt, clientID); status != 400 || got["error"] != "invalid_grant" {
		t.Fatalf("a replay after the window: %d %v; want 400 invalid_grant", status, got)
	}
	select {
	case <-g.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a replay after the grace window left the grant live")
	}
	for _, tok := range []string{at, at2, at3} {
		if _, err := a.Grants.Check(tok); err == nil {
			t.Errorf("%s… still works after the replay", tok[:8])
		}
	}
}
