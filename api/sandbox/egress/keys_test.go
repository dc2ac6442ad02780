package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"sync/atomic"
	"testing"
)

// Issue 37: "a deleted or rotated key keeps being injected on a
// connection the box opened before". On one kept connection (HTTP/2 and
// HTTP/1.1), the first request gets the value, the next one after the
// key's deletion the placeholder, and the next after it comes back
// rotated the new value.
func TestADeletedKeyStopsAtOnceOnAnOpenConnection(t *testing.T) {
	ts, s := upstream(t)
	var current atomic.Pointer[[]Injection]
	set := func(value string) {
		var inj []Injection
		if value != "" {
			inj = []Injection{{Placeholder: placeholder, Value: "Bearer " + value, Hosts: []string{"example.com"}, How: "Authorization: Bearer {}"}}
		}
		current.Store(&inj)
	}
	set(realValue)
	_, proxy, trust := interceptProxy(t, ts, Config{Injections: func(netip.Addr) []Injection { return *current.Load() }})
	u := fmt.Sprintf("https://example.com:%d/", ts.Listener.Addr().(*net.TCPAddr).Port)
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			set(realValue)
			c, _ := client(t, proxy, trust, h2)
			for i, step := range []struct{ key, want string }{
				{realValue, "Bearer " + realValue},
				{"", "Bearer " + placeholder},
				{"sk-proj-ROTATED", "Bearer sk-proj-ROTATED"},
			} {
				set(step.key)
				var reused bool
				req, _ := http.NewRequest("GET", u, nil)
				req.Header.Set("Authorization", "Bearer "+placeholder)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused },
				}))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body) // so HTTP/1.1 keeps the connection
				resp.Body.Close()
				if i > 0 && !reused {
					t.Fatalf("request %d was not sent on the first connection", i+1)
				}
				if got := s.last(t).Header.Get("Authorization"); got != step.want {
					t.Errorf("request %d (key %q): the upstream got Authorization %q, want %q", i+1, step.key, got, step.want)
				}
			}
		})
	}
}
