package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// agentsFixture is the agents' endpoints on a fresh database, served by
// an httptest server whose URL is the issuer, a registered client with a
// loopback redirect, and alice always signed in to the console.
type agentsFixture struct {
	t      *testing.T
	iss    string
	grants *Grants
	client Client
	user   users.User
	mux    *http.ServeMux
	// signedIn answers whether a request has the console session (always
	// unless a test sets it).
	signedIn func(*http.Request) bool

	mu  sync.Mutex
	now time.Time
}

func newAgentsFixture(t *testing.T) *agentsFixture {
	t.Helper()
	t.Parallel()
	db := dbtest.New(t, users.Schema, boxes.Schema, Schema)
	us := users.NewStore(db.Pool)
	us.KDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}
	u, err := us.Add(context.Background(), "alice", "a long enough password", false)
	if err != nil {
		t.Fatal(err)
	}
	f := &agentsFixture{t: t, user: u, now: time.Now(), signedIn: func(*http.Request) bool { return true }}
	clients := NewClients(db.Pool, newFetcher(t, FetcherConfig{}))
	f.client, err = clients.register(context.Background(), metadata{ClientName: "codex", RedirectURIs: []string{"http://127.0.0.1:1455/cb"}, GrantTypes: DefaultGrantTypes})
	if err != nil {
		t.Fatal(err)
	}
	f.grants = NewGrants(db.Pool, db.URL, slog.New(slog.DiscardHandler))
	f.grants.Now = f.clock
	if err := f.grants.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.grants.Stop)
	mux := http.NewServeMux()
	mux.Handle("GET /cb/assets/{name}", console.Assets()) // the consent page's script and style
	f.mux = mux
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.iss = srv.URL
	session := func(r *http.Request) (User, bool) { return User{ID: u.ID, Name: u.Name}, f.signedIn(r) }
	mux.Handle("/", NewAgents(f.iss, clients, f.grants, session, slog.New(slog.DiscardHandler)))
	return f
}

func (f *agentsFixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// advance moves the store's clock on by d.
func (f *agentsFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// verifier is a good RFC 7636 verifier (43 characters) and its challenge.
const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

// query is a good authorization request of the fixture's client.
func (f *agentsFixture) query() url.Values {
	return url.Values{"client_id": {f.client.ID}, "redirect_uri": {"http://127.0.0.1:1455/cb"}, "response_type": {"code"},
		"state": {"st4te"}, "code_challenge": {s256(verifier)}, "code_challenge_method": {"S256"},
		"scope": {"boxes"}, "resource": {f.iss + "/cocoonbox.mcp/control"}}
}

// call posts JSON body to the console call path: its status and answer.
func (f *agentsFixture) call(path string, body any) (int, map[string]any) {
	f.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(f.iss+path, "application/json", bytes.NewReader(b))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	json.NewDecoder(resp.Body).Decode(&got)
	return resp.StatusCode, got
}

// code approves q with the default caps and answers the code.
func (f *agentsFixture) code(q url.Values) string {
	f.t.Helper()
	status, got := f.call("/cb/api/oauth/approve", map[string]any{"query": q.Encode()})
	if status != 200 {
		f.t.Fatalf("approve: %d %v", status, got)
	}
	u, err := url.Parse(got["redirect"].(string))
	if err != nil || u.Query().Get("code") == "" || u.Query().Get("iss") != f.iss || u.Query().Get("state") != "st4te" {
		f.t.Fatalf("approve's redirect %v", got["redirect"])
	}
	return u.Query().Get("code")
}

// token posts form to the token endpoint: its status and answer.
func (f *agentsFixture) token(form url.Values) (int, map[string]any) {
	f.t.Helper()
	return f.post(TokenPath, form)
}

func (f *agentsFixture) post(path string, form url.Values) (int, map[string]any) {
	f.t.Helper()
	resp, err := http.PostForm(f.iss+path, form)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	json.NewDecoder(resp.Body).Decode(&got)
	return resp.StatusCode, got
}

// exchange is a good token request for code.
func (f *agentsFixture) exchange(code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {f.client.ID},
		"redirect_uri": {"http://127.0.0.1:1455/cb"}, "code_verifier": {verifier}, "resource": {f.iss + "/cocoonbox.mcp/control"}}
}

// tokens exchanges a fresh code: the access and refresh tokens.
func (f *agentsFixture) tokens() (string, string) {
	f.t.Helper()
	status, got := f.token(f.exchange(f.code(f.query())))
	if status != 200 {
		f.t.Fatalf("exchange: %d %v", status, got)
	}
	at, _ := got["access_token"].(string)
	rt, _ := got["refresh_token"].(string)
	if !strings.HasPrefix(at, "cba_") || !strings.HasPrefix(rt, "cbr_") || got["token_type"] != "Bearer" || got["scope"] != "boxes" ||
		got["expires_in"] != float64(AccessTTL/time.Second) {
		f.t.Fatalf("token answer %v", got)
	}
	return at, rt
}

func (f *agentsFixture) refresh(rt string) (int, map[string]any) {
	f.t.Helper()
	return f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {f.client.ID}})
}

func wantError(t *testing.T, what string, status int, got map[string]any, wantStatus int, code string) {
	t.Helper()
	if status != wantStatus || got["error"] != code {
		t.Errorf("%s: %d %v; want %d %s", what, status, got, wantStatus, code)
	}
}

// The code flow to the grant: the access token maps to the grant with
// the caps approved; a refresh (without resource) rotates the pair; the
// refreshed-away token replayed revokes the whole family, and the grant's
// Done closes.
func TestRefreshRotatesAndAReplayRevokesTheGrant(t *testing.T) {
	f := newAgentsFixture(t)
	status, got := f.call("/cb/api/oauth/approve", map[string]any{"query": f.query().Encode(), "max_boxes": 3, "max_running": 2, "days": 7})
	if status != 200 {
		t.Fatalf("approve: %d %v", status, got)
	}
	ru, _ := url.Parse(got["redirect"].(string))
	status, got = f.token(f.exchange(ru.Query().Get("code")))
	if status != 200 {
		t.Fatalf("exchange: %d %v", status, got)
	}
	at, rt := got["access_token"].(string), got["refresh_token"].(string)
	g, err := f.grants.Check(at)
	if err != nil || g.UserID != f.user.ID || g.UserName != "alice" || g.ClientID != f.client.ID || g.ClientName != "codex" ||
		g.MaxBoxes != 3 || g.MaxRunning != 2 || g.VerifiedHost != "" {
		t.Fatalf("the grant: %+v, %v", g, err)
	}
	if d := g.ExpiresAt.Sub(f.clock()); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
		t.Errorf("the grant ends in %s, want 7 days", d)
	}

	status, got = f.refresh(rt)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, got)
	}
	at2, rt2 := got["access_token"].(string), got["refresh_token"].(string)
	if at2 == at || rt2 == rt {
		t.Fatal("the refresh answered the same tokens")
	}
	if g2, err := f.grants.Check(at2); err != nil || g2 != g {
		t.Fatalf("the refreshed access token: %+v, %v (want the same grant)", g2, err)
	}
	select {
	case <-g.Done():
		t.Fatal("the grant ended on a refresh")
	default:
	}

	f.advance(RefreshGrace)     // past the grace window, where a replay ends the family
	status, got = f.refresh(rt) // the replay
	wantError(t, "a replayed refresh token", status, got, 400, "invalid_grant")
	select {
	case <-g.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a replayed refresh token left the grant live")
	}
	for _, tok := range []string{at, at2} {
		if _, err := f.grants.Check(tok); err == nil {
			t.Errorf("%s… still works after the replay", tok[:8])
		}
	}
	status, got = f.refresh(rt2)
	wantError(t, "the newest refresh token of a revoked family", status, got, 400, "invalid_grant")
}

// RFC 7009: either token revokes its grant; an unknown token is 200.
func TestRevokeEndsTheGrant(t *testing.T) {
	f := newAgentsFixture(t)
	at, rt := f.tokens()
	g, err := f.grants.Check(at)
	if err != nil {
		t.Fatal(err)
	}
	if status, got := f.post(RevocationPath, url.Values{"token": {"cba_" + strings.Repeat("0", 64)}}); status != 200 {
		t.Fatalf("an unknown token: %d %v", status, got)
	}
	status, got := f.post(RevocationPath, url.Values{"token": {at}, "client_id": {strings.Repeat("1", 32)}})
	wantError(t, "another client's revoke", status, got, 400, "invalid_grant")
	if _, err := f.grants.Check(at); err != nil {
		t.Fatal("another client's revoke ended the grant")
	}
	if status, got := f.post(RevocationPath, url.Values{"token": {at}, "token_type_hint": {"access_token"}}); status != 200 {
		t.Fatalf("revoke: %d %v", status, got)
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("the revoke left the grant's Done open")
	}
	if _, err := f.grants.Check(at); err == nil {
		t.Error("the access token works after its revoke")
	}
	status, got = f.refresh(rt)
	wantError(t, "the revoked grant's refresh token", status, got, 400, "invalid_grant")
}

// Bad input of the authorization request, each refused by its own check:
// a redirect URI outside the registered ones is shown (400, no redirect);
// plain PKCE, another scope and a resource outside the MCP go back to the
// client with their error, state and iss; caps out of range are a 400
// the page shows, and no code is made.
func TestBadAuthorizationRequestsAreRefused(t *testing.T) {
	f := newAgentsFixture(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	q := f.query()
	q.Set("redirect_uri", "https://evil.example/cb")
	resp, err := noFollow.Get(f.iss + AuthorizationPath + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Errorf("a redirect URI not registered: the page answered %d, Location %q; want 400 and none", resp.StatusCode, resp.Header.Get("Location"))
	}
	status, got := f.call("/cb/api/oauth/check", map[string]any{"query": q.Encode()})
	if status != 400 || got["redirect"] != nil || !strings.Contains(got["error_description"].(string), "not one the client registered") {
		t.Errorf("check of a redirect URI not registered: %d %v", status, got)
	}
	// The loopback port may change (RFC 8252 §7.3); the path may not.
	q.Set("redirect_uri", "http://127.0.0.1:50001/cb")
	if status, got := f.call("/cb/api/oauth/check", map[string]any{"query": q.Encode()}); status != 200 || got["loopback"] != true {
		t.Errorf("another loopback port: %d %v", status, got)
	}
	q.Set("redirect_uri", "http://127.0.0.1:1455/other")
	if status, got := f.call("/cb/api/oauth/check", map[string]any{"query": q.Encode()}); status != 400 || got["redirect"] != nil {
		t.Errorf("another loopback path: %d %v", status, got)
	}
	// An unknown client: shown, never redirected.
	q = f.query()
	q.Set("client_id", strings.Repeat("0", 32))
	if status, got := f.call("/cb/api/oauth/check", map[string]any{"query": q.Encode()}); status != 400 || got["redirect"] != nil || got["error"] != "invalid_client" {
		t.Errorf("an unknown client: %d %v", status, got)
	}

	for _, c := range []struct{ param, value, code string }{
		{"code_challenge_method", "plain", "invalid_request"},
		{"code_challenge_method", "", "invalid_request"},
		{"code_challenge", verifier[:42], "invalid_request"},
		// base64's decoder skips line breaks even in Strict mode.
		{"code_challenge", s256(verifier)[:20] + "\n" + s256(verifier)[20:], "invalid_request"},
		{"scope", "boxes admin", "invalid_scope"},
		{"scope", "openid", "invalid_scope"},
		{"resource", f.iss + "/cocoonbox.mcpx", "invalid_target"},
		{"resource", f.iss + "/cocoonbox.oauth/token", "invalid_target"},
		{"resource", "https://other.example/cocoonbox.mcp", "invalid_target"},
		{"resource", f.iss + "/cocoonbox.mcp/../cb", "invalid_target"},
		{"response_type", "token", "unsupported_response_type"},
	} {
		q := f.query()
		q.Set(c.param, c.value)
		status, got := f.call("/cb/api/oauth/check", map[string]any{"query": q.Encode()})
		red, _ := got["redirect"].(string)
		u, _ := url.Parse(red)
		if status != 400 || u == nil || u.Query().Get("error") != c.code || u.Query().Get("iss") != f.iss || u.Query().Get("state") != "st4te" ||
			!strings.HasPrefix(red, "http://127.0.0.1:1455/cb?") {
			t.Errorf("%s=%q: %d %v; want a redirect with %s, state and iss", c.param, c.value, status, got, c.code)
		}
		resp, err := noFollow.Get(f.iss + AuthorizationPath + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc, _ := url.Parse(resp.Header.Get("Location")); resp.StatusCode != 303 || loc.Query().Get("error") != c.code || loc.Query().Get("iss") != f.iss {
			t.Errorf("%s=%q: the page answered %d to %q", c.param, c.value, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// Deny goes back as access_denied with iss.
	_, got = f.call("/cb/api/oauth/deny", map[string]any{"query": f.query().Encode()})
	if u, _ := url.Parse(got["redirect"].(string)); u.Query().Get("error") != "access_denied" || u.Query().Get("iss") != f.iss {
		t.Errorf("deny: %v", got)
	}

	for _, caps := range []map[string]any{
		{"max_boxes": 0}, {"max_boxes": 17}, {"max_boxes": 2, "max_running": 3}, {"max_running": 0},
		{"days": 2}, {"days": 0}, {"days": 365},
	} {
		caps["query"] = f.query().Encode()
		status, got := f.call("/cb/api/oauth/approve", caps)
		if status != 400 || got["redirect"] != nil || got["error"] != "invalid_request" {
			t.Errorf("approve %v: %d %v; want 400 shown", caps, status, got)
		}
	}
	var codes int
	f.grants.pool.QueryRow(context.Background(), "SELECT count(*) FROM oauth_codes").Scan(&codes)
	if codes != 0 {
		t.Errorf("%d codes stored by refused approvals", codes)
	}
	// The edges are allowed.
	for _, caps := range []map[string]any{{"max_boxes": 16, "max_running": 16, "days": 90}, {"max_boxes": 1, "max_running": 1, "days": 1}} {
		caps["query"] = f.query().Encode()
		if status, got := f.call("/cb/api/oauth/approve", caps); status != 200 {
			t.Errorf("approve %v: %d %v", caps, status, got)
		}
	}
}

// Bad input of the token request: a 42-character verifier and a resource
// outside the MCP are refused and leave the code usable; a code used
// twice is refused and revokes the grant its first use made; a code after
// its 60 s is refused.
func TestBadTokenRequestsAreRefused(t *testing.T) {
	f := newAgentsFixture(t)
	code := f.code(f.query())
	x := f.exchange(code)
	x.Set("code_verifier", verifier[:42])
	status, got := f.token(x)
	wantError(t, "a 42-character verifier", status, got, 400, "invalid_request")
	x = f.exchange(code)
	x.Set("code_verifier", strings.Repeat("a", 43))
	status, got = f.token(x)
	wantError(t, "another verifier", status, got, 400, "invalid_grant")

	code = f.code(f.query())
	for _, res := range []string{f.iss + "/cocoonbox.mcpx", f.iss + "/cb/api", "https://other.example/cocoonbox.mcp"} {
		x = f.exchange(code)
		x.Set("resource", res)
		status, got = f.token(x)
		wantError(t, "resource "+res, status, got, 400, "invalid_target")
	}
	x = f.exchange(code)
	x.Set("scope", "admin")
	status, got = f.token(x)
	wantError(t, "scope admin", status, got, 400, "invalid_scope")
	x = f.exchange(code)
	x.Set("resource", f.iss+"/cocoonbox.mcp") // the resource itself, as the contract names it
	status, got = f.token(x)
	if status != 200 {
		t.Fatalf("the code after refused requests: %d %v", status, got)
	}
	g, err := f.grants.Check(got["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	status, got = f.token(f.exchange(code))
	wantError(t, "a code used twice", status, got, 400, "invalid_grant")
	select {
	case <-g.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a code used twice left the grant of its first use live")
	}

	code = f.code(f.query())
	f.advance(CodeTTL + time.Second)
	status, got = f.token(f.exchange(code))
	wantError(t, "a code after 60 s", status, got, 400, "invalid_grant")

	status, got = f.token(url.Values{"grant_type": {"password"}, "client_id": {f.client.ID}})
	wantError(t, "grant_type password", status, got, 400, "unsupported_grant_type")
	// A Basic secret is a confidential client's.
	req, _ := http.NewRequest("POST", f.iss+TokenPath, strings.NewReader(f.exchange(f.code(f.query())).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(f.client.ID, "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("a Basic secret: %d, want 401", resp.StatusCode)
	}
}

// The index drops a grant another api revoked, through NOTIFY alone.
func TestAnotherAPIsRevokeReachesThisIndex(t *testing.T) {
	f := newAgentsFixture(t)
	at, _ := f.tokens()
	g, err := f.grants.Check(at)
	if err != nil {
		t.Fatal(err)
	}
	other := NewGrants(f.grants.pool, f.grants.url, slog.New(slog.DiscardHandler))
	if err := other.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	if _, err := other.Check(at); err != nil {
		t.Fatalf("the other api's index: %v", err)
	}
	// The other api revokes without telling this one but by NOTIFY.
	tx, _ := f.grants.pool.Begin(context.Background())
	tx.Exec(context.Background(), `UPDATE oauth_grants SET revoked_at = now()`)
	notify(context.Background(), tx, f.user.ID)
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a revoke notified elsewhere did not reach this index")
	}
	// The other index follows its own NOTIFY: wait for it too (checked at
	// once, this failed now and then).
	wait.Eventually(t, 30*time.Second, "the other index dropping the token", func() (bool, string) {
		_, err := other.Check(at)
		return err != nil, "the other index keeps the token"
	})
}

// A grant's last use is written from the token check (at most each
// UseInterval), for the Agents page.
func TestTheTokenCheckWritesTheGrantsLastUse(t *testing.T) {
	f := newAgentsFixture(t)
	at, _ := f.tokens()
	g, err := f.grants.Check(at)
	if err != nil {
		t.Fatal(err)
	}
	f.advance(10 * time.Minute)
	want := f.clock()
	if _, err := f.grants.Check(at); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the last use written", func() (bool, string) {
		var used time.Time
		f.grants.pool.QueryRow(context.Background(), "SELECT last_used_at FROM oauth_grants WHERE id = $1", g.ID).Scan(&used)
		return used.Equal(want.Truncate(time.Microsecond)), fmt.Sprintf("last_used_at %s, want %s", used, want)
	})
}

// The check of an access token: one HMAC and one map lookup.
func BenchmarkCheck(b *testing.B) {
	s := NewGrants(nil, "", slog.New(slog.DiscardHandler))
	s.key = make([]byte, 32)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &grantEntry{g: &Grant{ID: "cbg_x", ctx: ctx}, tokens: map[[32]byte]bool{}}
	e.lastWrite.Store(time.Now().Add(time.Hour).UnixNano()) // no write queued
	for range 10000 {
		tok := newSecret(AccessPrefix)
		s.byDigest[s.digest(tok)] = &access{e: e, expires: time.Now().Add(time.Hour)}
	}
	tok := newSecret(AccessPrefix)
	s.byDigest[s.digest(tok)] = &access{e: e, expires: time.Now().Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Check(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// The consent page says when the client already holds a live grant of
// the user, and stops saying so once it ends; it shows the redirect's
// host and the loopback warning, and "unverified" for a registered
// client (no verified host).
func TestCheckSaysWhatThePageShows(t *testing.T) {
	f := newAgentsFixture(t)
	check := func() map[string]any {
		status, got := f.call("/cb/api/oauth/check", map[string]any{"query": f.query().Encode()})
		if status != 200 {
			t.Fatalf("check: %d %v", status, got)
		}
		return got
	}
	got := check()
	if got["live_grant"] != false || got["client_name"] != "codex" || got["verified_host"] != "" || got["redirect_host"] != "127.0.0.1:1455" ||
		got["loopback"] != true || got["user"] != "alice" || got["max_boxes"] != float64(2) || got["max_running"] != float64(1) || got["days"] != float64(30) {
		t.Errorf("check before a grant: %v", got)
	}
	at, _ := f.tokens()
	if got := check(); got["live_grant"] != true {
		t.Errorf("check with a live grant: %v", got)
	}
	f.post(RevocationPath, url.Values{"token": {at}})
	if got := check(); got["live_grant"] != false {
		t.Errorf("check after the revoke: %v", got)
	}
}

// Prune deletes codes and access tokens an hour past their expiry and
// the tokens of an ended grant; a spent refresh token of a live grant
// stays (its replay must still revoke the grant).
func TestPruneKeepsWhatAReplayNeeds(t *testing.T) {
	f := newAgentsFixture(t)
	_, rt := f.tokens()
	if status, got := f.refresh(rt); status != 200 { // rt is now spent
		t.Fatalf("refresh: %d %v", status, got)
	}
	ended, _ := f.tokens()
	f.post(RevocationPath, url.Values{"token": {ended}})
	f.code(f.query()) // a code never used
	count := func(q string) (n int) {
		f.grants.pool.QueryRow(context.Background(), q).Scan(&n)
		return n
	}
	f.advance(AccessTTL + pruneAfter + time.Minute)
	if err := f.grants.prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM oauth_codes`); n != 0 {
		t.Errorf("%d codes left", n)
	}
	if n := count(`SELECT count(*) FROM oauth_tokens WHERE kind = 'access'`); n != 0 {
		t.Errorf("%d access tokens left", n)
	}
	// The live grant's two refresh tokens (the spent and the current) stay;
	// the revoked grant's go.
	if n := count(`SELECT count(*) FROM oauth_tokens WHERE kind = 'refresh'`); n != 2 {
		t.Errorf("%d refresh tokens left, want the live grant's 2", n)
	}
	status, got := f.refresh(rt)
	wantError(t, "the spent refresh token after a prune", status, got, 400, "invalid_grant")
	var revoked int
	f.grants.pool.QueryRow(context.Background(), `SELECT count(*) FROM oauth_grants WHERE revoked_at IS NOT NULL`).Scan(&revoked)
	if revoked != 2 {
		t.Errorf("%d grants revoked, want 2 (the replay still revokes after a prune)", revoked)
	}
}

// The agents' consent page in headless Chromium without a session and
// with GitHub sign-in offered: the GitHub sign-in begins with the page
// itself as return_to, comes back signed in, the page shows the agent
// (unverified, loopback, the keys sentence), and Allow reaches the
// redirect URI with code, state and iss. The providers, begin and
// GitHub's round trip are stand-ins for package signup's.
func TestConsentPageSignsInWithGitHubAndAllows(t *testing.T) {
	f := newAgentsFixture(t)
	f.signedIn = func(r *http.Request) bool {
		c, err := r.Cookie("cb_session")
		return err == nil && c.Value == "ok"
	}
	f.mux.HandleFunc("GET /cb/api/auth/providers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"github":true}`))
	})
	begun := make(chan map[string]string, 1)
	f.mux.HandleFunc("POST /cb/api/auth/github/begin", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		json.NewDecoder(r.Body).Decode(&body)
		begun <- body
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"url": "/github/authorize?return_to=" + url.QueryEscape(body["return_to"])})
	})
	f.mux.HandleFunc("GET /github/authorize", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "cb_session", Value: "ok", Path: "/cb/", HttpOnly: true})
		http.Redirect(w, r, r.URL.Query().Get("return_to"), http.StatusSeeOther)
	})
	callbacks := make(chan url.Values, 1)
	f.mux.HandleFunc("GET /cb", func(w http.ResponseWriter, r *http.Request) {
		callbacks <- r.URL.Query()
		w.Write([]byte("back at the agent"))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q := f.query()
	q.Set("redirect_uri", f.iss+"/cb") // the registered loopback URI on this server's port
	page := AuthorizationPath + "?" + q.Encode()
	if err := b.Go(ctx, f.iss+page); err != nil {
		t.Fatal(err)
	}
	if err := b.Click(ctx, "#github-signin"); err != nil {
		t.Fatal(err)
	}
	if got := <-begun; got["return_to"] != page {
		t.Fatalf("begin got %v; want return_to %s", got, page)
	}
	if err := b.WaitFor(ctx, "the consent", func(_, text string) bool {
		return strings.Contains(text, "unverified agent calling itself “codex”") && strings.Contains(text, "its name is its own claim") &&
			strings.Contains(text, "loopback") && strings.Contains(text, "cannot use your saved keys or your connected accounts")
	}); err != nil {
		text, _ := b.Text(ctx)
		t.Fatalf("%v; the page shows:\n%s", err, text)
	}
	if err := b.Click(ctx, "#allow"); err != nil {
		t.Fatal(err)
	}
	back := <-callbacks
	if back.Get("code") == "" || back.Get("state") != "st4te" || back.Get("iss") != f.iss {
		t.Fatalf("Allow went to the redirect URI with %v", back)
	}
}
