package egress

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

// leaks lists the forms of realValue in s.
func leaks(s string) []string {
	var out []string
	for _, f := range []string{realValue, url.QueryEscape(realValue), url.PathEscape(realValue),
		base64.StdEncoding.EncodeToString([]byte(realValue)), base64.RawURLEncoding.EncodeToString([]byte(realValue))} {
		if strings.Contains(s, f) {
			out = append(out, f)
		}
	}
	return out
}

// Issue 37: "the value comes back to the box when the listed host
// reflects it". An upstream that echoes the value in a Location, in
// another header, in a trailer (HTTP/2) and in its body (as is,
// URL-escaped and in base64, written in pieces that split the value,
// with its Content-Length over HTTP/1.1) answers the box with the placeholder in each, over HTTP/2 and
// HTTP/1.1; the body the box reads is whole (no Content-Length left that
// the cleaned body would contradict). The upstream was asked for an
// unencoded body.
func TestTheValueComesBackToTheBoxAsThePlaceholder(t *testing.T) {
	s := &seen{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
		key := r.URL.Query().Get("key")
		auth := r.Header.Get("Authorization")
		body := fmt.Sprintf("auth=%s query=%s escaped=%s b64=%s b64url=%s end",
			auth, r.URL.RawQuery, url.QueryEscape(key), base64.StdEncoding.EncodeToString([]byte(key)), base64.RawURLEncoding.EncodeToString([]byte(key)))
		w.Header().Set("Location", "https://example.com/next?key="+url.QueryEscape(key))
		w.Header().Set("X-Echo", auth)
		if r.ProtoMajor == 2 {
			w.Header().Set("Trailer", "X-Echo-Trailer")
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		}
		w.WriteHeader(http.StatusFound)
		// Split inside the first value, each piece flushed.
		cut := strings.Index(body, key) + 5
		io.WriteString(w, body[:cut])
		w.(http.Flusher).Flush()
		io.WriteString(w, body[cut:])
		w.Header().Set("X-Echo-Trailer", key)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	_, proxy, trust := interceptProxy(t, ts, Config{})
	u := fmt.Sprintf("https://example.com:%d/?key=%s", ts.Listener.Addr().(*net.TCPAddr).Port, placeholder)
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			c, _ := client(t, proxy, trust, h2)
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			req, _ := http.NewRequest("GET", u, nil)
			req.Header.Set("Authorization", "Bearer "+placeholder)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("the body: %v (after %q)", err, b)
			}
			if r := s.last(t); r.URL.Query().Get("key") != realValue || r.Header.Get("Accept-Encoding") != "identity" {
				t.Fatalf("the upstream got ?key=%q, Accept-Encoding %q", r.URL.Query().Get("key"), r.Header.Get("Accept-Encoding"))
			}
			var all strings.Builder
			fmt.Fprint(&all, resp.Header, resp.Trailer, string(b))
			if l := leaks(all.String()); len(l) > 0 {
				t.Errorf("the box was sent the value as %q:\n%s", l, all.String())
			}
			wantBody := fmt.Sprintf("auth=Bearer %[1]s query=key=%[1]s escaped=%[1]s b64=%[2]s b64url=%[3]s end", placeholder,
				base64.StdEncoding.EncodeToString([]byte(placeholder)), base64.RawURLEncoding.EncodeToString([]byte(placeholder)))
			if string(b) != wantBody {
				t.Errorf("body\n%s\nwant\n%s", b, wantBody)
			}
			if got := resp.Header.Get("Location"); got != "https://example.com/next?key="+placeholder {
				t.Errorf("Location %q", got)
			}
			if got := resp.Header.Get("X-Echo"); got != "Bearer "+placeholder {
				t.Errorf("X-Echo %q", got)
			}
			if got := resp.Trailer.Get("X-Echo-Trailer"); h2 && got != placeholder {
				t.Errorf("trailer X-Echo-Trailer %q", got)
			}
			if resp.ContentLength != -1 && resp.ContentLength != int64(len(b)) {
				t.Errorf("Content-Length %d for a body of %d bytes", resp.ContentLength, len(b))
			}
		})
	}
}

// The streamed cleaning finds a value however the reads split it (one
// byte at a time here), prefers the longest form at a position, and
// leaves the bytes past its limit as they are (the documented bound):
// a value starting inside the limit is cleaned whole.
func TestTheBodyIsCleanedAcrossReadsUpToItsLimit(t *testing.T) {
	v := newValues([]Injection{{Placeholder: "PH", Value: "Bearer sekret", How: "Authorization: Bearer {}"}})
	in := "a sekret, Bearer sekret, sek, sekre" + base64.StdEncoding.EncodeToString([]byte("sekret")) + " sekret|sekret sekret"
	limit := strings.Index(in, "|") + 2 // inside the second-last value
	want := "a PH, Bearer PH, sek, sekre" + base64.StdEncoding.EncodeToString([]byte("PH")) + " PH|PH sekret"
	for name, r := range map[string]io.Reader{"one byte": iotest.OneByteReader(strings.NewReader(in)), "whole": strings.NewReader(in)} {
		got, err := io.ReadAll(newScrubBody(io.NopCloser(r), v, int64(limit)))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", name, got, err, want)
		}
	}
	var big bytes.Buffer
	for big.Len() < 3*DefaultScrubBodyLimit {
		big.WriteString("x sekret ")
	}
	whole := big.String()
	cut := DefaultScrubBodyLimit + strings.Index(whole[DefaultScrubBodyLimit:], "sekret")
	want = strings.ReplaceAll(whole[:cut], "sekret", "PH") + whole[cut:]
	if got, _ := io.ReadAll(newScrubBody(io.NopCloser(&big), v, DefaultScrubBodyLimit)); string(got) != want {
		t.Errorf("a body of %d bytes: %d bytes cleaned, want the values starting in its first %d cleaned", len(whole), len(got), DefaultScrubBodyLimit)
	}
}
