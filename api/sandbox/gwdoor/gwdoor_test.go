package gwdoor_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/gw"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
	"github.com/cocoonbox/cocoonbox/api/sandbox/gwdoor"
)

// door serves a door to g whose one box, at loopback, has key.
func door(t *testing.T, g *gwtest.Server, key *string) *httptest.Server {
	t.Helper()
	d, err := gwdoor.New(g.URL, func(box netip.Addr) string {
		if box == netip.MustParseAddr("127.0.0.1") {
			return *key
		}
		return ""
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(d)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, c *http.Client, u, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Contract: Box API keys, Model usage: the box sends unprovisioned (or
// anything) and gw sees the owner's key.
func TestTheDoorSendsTheBoxOwnersKeyWhateverTheBoxSent(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	k, err := gw.New(g.URL, g.MasterKey, nil).Generate(context.Background(), "u1", "", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	key := k.Value
	d := door(t, g, &key)
	for _, sent := range []string{"unprovisioned", "sk-someone-elses"} {
		if st, body := get(t, http.DefaultClient, d.URL+"/v1/models", sent); st != 200 || !strings.Contains(body, gwtest.Models[0].ID) {
			t.Fatalf("sent %s: %d %s", sent, st, body)
		}
	}
	for _, c := range g.Calls() {
		if c.Key != key {
			t.Fatalf("gw saw the key %q, want the owner's", c.Key)
		}
	}
	// Control: without the door, unprovisioned is refused by gw.
	if st, _ := get(t, http.DefaultClient, g.URL+"/v1/models", "unprovisioned"); st != 401 {
		t.Fatalf("unprovisioned straight to gw: %d, want 401", st)
	}
}

// Root in the box is the attacker: the door forwards the OpenAI API only,
// never gw's admin API, and a box with no key gets a clear refusal.
func TestTheDoorForwardsTheOpenAIAPIOnly(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	key := g.MasterKey // the worst case: even a key that would open the admin API
	d := door(t, g, &key)
	before := len(g.Keys())
	for _, p := range []string{"/key/generate", "/user/daily/activity", "/v1/../key/generate", "/v1/%2e%2e/key/generate", "/v1/..", "/v1/./../key/generate", "/v1%2f..%2fkey/generate"} {
		req, _ := http.NewRequest(http.MethodPost, d.URL+p, strings.NewReader(`{"user_id":"x"}`))
		req.URL.Opaque = p // sent as is, not cleaned by the client
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s through the door: %d, want 404", p, resp.StatusCode)
		}
	}
	if len(g.Keys()) != before {
		t.Fatal("a key was minted through the door")
	}
	key = ""
	if st, body := get(t, http.DefaultClient, d.URL+"/v1/models", "unprovisioned"); st != 503 || !strings.Contains(body, "gw_key_missing") {
		t.Fatalf("a box without a key: %d %s, want 503 gw_key_missing", st, body)
	}
}

// A box's HTTP_PROXY carries the call to GW_BASE_URL: the egress proxy
// serves the gateway's door itself, with the box's address.
func TestTheEgressProxyServesTheDoorForAPlainHTTPRequest(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	k, err := gw.New(g.URL, g.MasterKey, nil).Generate(context.Background(), "u1", "", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	d, err := gwdoor.New(g.URL, func(box netip.Addr) string {
		if box.IsLoopback() {
			return k.Value
		}
		return ""
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{Doors: map[string]http.Handler{"10.203.0.1:18090": d}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ps := httptest.NewServer(p)
	defer ps.Close()
	pu, _ := url.Parse(ps.URL)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	if st, body := get(t, c, "http://10.203.0.1:18090/v1/models", "unprovisioned"); st != 200 || !strings.Contains(body, gwtest.Models[0].ID) {
		t.Fatalf("through the proxy: %d %s", st, body)
	}
	// Control: another port of the gateway is still the host's own
	// address, refused.
	if st, _ := get(t, c, "http://10.203.0.1:18091/v1/models", "unprovisioned"); st != 403 {
		t.Fatalf("another gateway port through the proxy: %d, want 403", st)
	}
}
