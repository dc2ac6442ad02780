package console_test

import (
	"encoding/json"
	"github.com/cocoonbox/cocoonbox/api/console"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signInFrom is a sign-in that the proxy in front (this test's loopback
// peer, trusted) says came from client.
func (e *env) signInFrom(client, user, password string) (*http.Response, string) {
	e.t.Helper()
	b, _ := json.Marshal(map[string]string{"user": user, "password": password})
	req, err := http.NewRequest("POST", e.url+"/cb/api/session", strings.NewReader(string(b)))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", client)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}

// throttled says whether an answer is the limit's: 429, too_many, and a
// Retry-After of want seconds.
func throttled(resp *http.Response, body string, want int) bool {
	return resp.StatusCode == http.StatusTooManyRequests && strings.Contains(body, `"too_many"`) &&
		resp.Header.Get("Retry-After") == strconv.Itoa(want) && len(resp.Cookies()) == 0
}

// The sign-in had no rate limit (review debt): a user name's wrong
// passwords are now bounded, and past the bound even the right password
// gets 429, so guessing learns nothing more; unknown names are bounded
// alike, so 429 tells no name apart.
func TestSignInFailuresPerUserNameAreLimited(t *testing.T) {
	t.Parallel()
	e := newLimitedEnv(t, false, console.SignInLimits{PerUser: 3, PerAddress: 1000, Window: 15 * time.Minute, TrustedProxies: loopback})
	for _, name := range []string{"alice", "nosuchuser"} {
		for i := range 3 {
			// Each guess from another address: the name's limit is not the address's.
			if resp, body := e.signInFrom("198.51.100."+strconv.Itoa(i+1), name, "wrong horse"); resp.StatusCode != 401 {
				t.Fatalf("%s, guess %d: %d %s, want 401", name, i+1, resp.StatusCode, body)
			}
		}
		// 15 min / 3: one more in 5 min.
		if resp, body := e.signInFrom("198.51.100.9", name, "correct horse"); !throttled(resp, body, 300) {
			t.Fatalf("%s, past the limit with the right password: %d %s Retry-After %q, want 429 too_many, Retry-After 300 and no cookie",
				name, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	// Another name is not held by alice's.
	if resp, body := e.signInFrom("198.51.100.9", "bob", "correct horse"); resp.StatusCode != 200 {
		t.Fatalf("bob while alice is held: %d %s", resp.StatusCode, body)
	}
	e.clock.Add(int64(5 * time.Minute))
	if resp, body := e.signInFrom("198.51.100.9", "alice", "correct horse"); resp.StatusCode != 200 {
		t.Fatalf("alice after one refill: %d %s", resp.StatusCode, body)
	}
}

// A right password, and a disabled account's (whose password was right),
// give the name's attempt back: a user who signs in often is never held.
func TestSignInsThatSucceedDoNotCount(t *testing.T) {
	t.Parallel()
	e := newLimitedEnv(t, false, console.SignInLimits{PerUser: 2, PerAddress: 1000, Window: time.Hour, TrustedProxies: loopback})
	for i := range 5 {
		if resp, body := e.signInFrom("198.51.100.1", "alice", "correct horse"); resp.StatusCode != 200 {
			t.Fatalf("sign-in %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if _, err := e.users.SetDisabled(t.Context(), "bob", true); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if resp, body := e.signInFrom("198.51.100.1", "bob", "correct horse"); resp.StatusCode != 403 {
			t.Fatalf("disabled bob, try %d: %d %s, want 403 each time", i+1, resp.StatusCode, body)
		}
	}
	// The control case: two wrong ones do hold the name.
	e.signInFrom("198.51.100.1", "alice", "wrong")
	e.signInFrom("198.51.100.1", "alice", "wrong")
	if resp, body := e.signInFrom("198.51.100.1", "alice", "correct horse"); resp.StatusCode != 429 {
		t.Fatalf("after two failures with per_user 2: %d %s, want 429", resp.StatusCode, body)
	}
}

// Every attempt of one client address counts, right or wrong, whatever
// the name (a name no account can have included); the address is the one
// the trusted proxy forwarded, and another address is not held by it.
func TestSignInsPerClientAddressAreLimited(t *testing.T) {
	t.Parallel()
	e := newLimitedEnv(t, false, console.SignInLimits{PerUser: 1000, PerAddress: 4, Window: time.Minute, TrustedProxies: loopback})
	for i, name := range []string{"alice", "bob", "Not A Name", "carol"} {
		password := "wrong"
		if i == 0 {
			password = "correct horse"
		}
		if resp, body := e.signInFrom("203.0.113.5", name, password); resp.StatusCode == 429 {
			t.Fatalf("attempt %d (%s) refused within the limit: %s", i+1, name, body)
		}
	}
	if resp, body := e.signInFrom("203.0.113.5", "alice", "correct horse"); !throttled(resp, body, 15) || !strings.Contains(body, "from this address") {
		t.Fatalf("fifth attempt of the address: %d %s Retry-After %q, want 429 from this address, Retry-After 15",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if resp, body := e.signInFrom("203.0.113.6", "alice", "correct horse"); resp.StatusCode != 200 {
		t.Fatalf("another address: %d %s", resp.StatusCode, body)
	}
	// Without a trusted proxy the header is the client's own claim: every
	// request counts under the peer (loopback here), whatever it forwards.
	e2 := newLimitedEnv(t, false, console.SignInLimits{PerUser: 1000, PerAddress: 1, Window: time.Minute})
	e2.signInFrom("203.0.113.7", "alice", "correct horse")
	if resp, body := e2.signInFrom("203.0.113.8", "alice", "correct horse"); resp.StatusCode != 429 {
		t.Fatalf("an untrusted peer's X-Forwarded-For gave it a fresh key: %d %s", resp.StatusCode, body)
	}
}
