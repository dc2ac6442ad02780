package oauth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// docServer serves metadata documents over https on loopback: at each
// path of docs, the body the function makes of the document's own URL,
// with the headers it sets. It counts the requests.
type docServer struct {
	*httptest.Server
	hits atomic.Int32
}

func newDocServer(t *testing.T, docs map[string]func(w http.ResponseWriter, self string)) *docServer {
	t.Helper()
	s := &docServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		f, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		f(w, s.URL+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

// testFetcher trusts s's certificate and may dial loopback, as only a
// test's fetcher does.
func testFetcher(t testing.TB, s *docServer, now func() time.Time) *Fetcher {
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	return newFetcher(t, FetcherConfig{TestAllowLoopback: true, TestRoots: roots, Now: now})
}

// newFetcher is NewFetcher(cfg), closed when the test ends.
func newFetcher(t testing.TB, cfg FetcherConfig) *Fetcher {
	t.Helper()
	f, err := NewFetcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// doc answers a good document of a CLI's loopback redirect, with extra
// JSON fields and headers.
func doc(headers map[string]string, fields string) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, self string) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"client_id": %q, "client_name": "Claude Code", "redirect_uris": ["http://127.0.0.1/callback", "http://localhost/callback"],
			"grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"], "token_endpoint_auth_method": "none"%s}`, self, fields)
	}
}

func TestMetadataDocumentGivesRedirectURIsNameAndVerifiedHost(t *testing.T) {
	s := newDocServer(t, map[string]func(http.ResponseWriter, string){"/client.json": doc(nil, `, "logo_uri": "https://x/l.png"`)})
	c, err := testFetcher(t, s, nil).Fetch(context.Background(), s.URL+"/client.json")
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(s.URL, "https://")
	if c.ID != s.URL+"/client.json" || c.Name != "Claude Code" || c.VerifiedHost != host ||
		strings.Join(c.RedirectURIs, " ") != "http://127.0.0.1/callback http://localhost/callback" {
		t.Errorf("client %+v", c)
	}
}

// Each a bad input of the issue: refused, naming the rule.
func TestMetadataDocumentBadInputIsRefused(t *testing.T) {
	big := strings.Repeat(" ", MaxDocument)
	s := newDocServer(t, map[string]func(http.ResponseWriter, string){
		"/big.json": func(w http.ResponseWriter, self string) {
			body := fmt.Sprintf(`{"client_id": %q, "redirect_uris": ["http://127.0.0.1/cb"], "x": "%s"}`, self, big)
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.Write([]byte(body))
		},
		"/big-chunked.json": func(w http.ResponseWriter, self string) {
			doc(nil, "")(w, self)
			w.(http.Flusher).Flush() // no Content-Length: the bound is on the bytes read
			w.Write([]byte(big))
		},
		"/redirect.json": func(w http.ResponseWriter, self string) {
			http.Redirect(w, &http.Request{}, strings.TrimSuffix(self, "/redirect.json")+"/good.json", http.StatusFound)
		},
		"/good.json": doc(nil, ""),
		"/other-id.json": func(w http.ResponseWriter, self string) {
			doc(nil, "")(w, strings.TrimSuffix(self, "/other-id.json")+"/good.json")
		},
		"/basic.json": func(w http.ResponseWriter, self string) {
			fmt.Fprintf(w, `{"client_id": %q, "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "client_secret_basic"}`, self)
		},
		"/secret.json": doc(nil, `, "client_secret": "s3cret"`),
		"/js.json": func(w http.ResponseWriter, self string) {
			fmt.Fprintf(w, `{"client_id": %q, "redirect_uris": ["javascript:alert(1)"]}`, self)
		},
		"/gone.json": func(w http.ResponseWriter, self string) { http.Error(w, "gone", http.StatusGone) },
	})
	f := testFetcher(t, s, nil)
	strict := newFetcher(t, FetcherConfig{}) // production's: no loopback, system roots
	port := s.URL[strings.LastIndex(s.URL, ":"):]
	cases := []struct {
		f    *Fetcher
		id   string
		want string
	}{
		{f, s.URL + "/big.json", fmt.Sprintf("bytes: at most %d", MaxDocument)},
		{f, s.URL + "/big-chunked.json", fmt.Sprintf("over %d bytes", MaxDocument)},
		{f, strings.Replace(s.URL, "https:", "http:", 1) + "/good.json", "a metadata document's URL is https"},
		{strict, s.URL + "/good.json", "127.0.0.1 is not a public address"},
		{strict, "https://localhost" + port + "/good.json", "is not a public address"},
		{strict, "https://10.0.0.1/client.json", "10.0.0.1 is not a public address"},
		{strict, "https://[fd00::1]/client.json", "fd00::1 is not a public address"},
		{f, s.URL + "/redirect.json", "302 Found to " + s.URL + "/good.json: redirects are not followed"},
		{f, s.URL + "/other-id.json", fmt.Sprintf("client_id %q is not the document's URL %q", s.URL+"/good.json", s.URL+"/other-id.json")},
		{f, s.URL + "/basic.json", `token_endpoint_auth_method "client_secret_basic": only none`},
		{f, s.URL + "/secret.json", "client_secret: only public clients"},
		{f, s.URL + "/js.json", `redirect URI "javascript:alert(1)"`},
		{f, s.URL + "/gone.json", "answered 410 Gone, want 200"},
		{f, s.URL + "/", "has a path"},
		{f, s.URL + "/a/../good.json", "no . or .. segment"},
		{f, s.URL + "/good.json#x", "no fragment"},
	}
	for _, c := range cases {
		_, err := c.f.Fetch(context.Background(), c.id)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.id, err, c.want)
		}
	}
	if _, err := f.Fetch(context.Background(), s.URL+"/basic.json"); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("client_secret_basic: %v, want invalid_client_metadata", err)
	}
}

// The cache keeps a document as its headers say, and no longer.
func TestMetadataDocumentIsCachedByItsHeaders(t *testing.T) {
	s := newDocServer(t, map[string]func(http.ResponseWriter, string){
		"/max-age.json":  doc(map[string]string{"Cache-Control": "public, max-age=60"}, ""),
		"/no-store.json": doc(map[string]string{"Cache-Control": "max-age=60, no-store"}, ""),
		"/none.json":     doc(nil, ""),
		"/expires.json": func(w http.ResponseWriter, self string) {
			w.Header().Set("Expires", time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat))
			doc(nil, "")(w, self)
		},
	})
	now := time.Now()
	f := testFetcher(t, s, func() time.Time { return now })
	fetches := func(path string, wait time.Duration) int32 {
		before := s.hits.Load()
		for range 2 {
			if _, err := f.Fetch(context.Background(), s.URL+path); err != nil {
				t.Fatal(err)
			}
			now = now.Add(wait)
		}
		return s.hits.Load() - before
	}
	for path, want := range map[string]int32{"/max-age.json": 1, "/no-store.json": 2, "/none.json": 2, "/expires.json": 1} {
		if got := fetches(path, 0); got != want {
			t.Errorf("%s fetched %d times for two lookups, want %d", path, got, want)
		}
	}
	now = now.Add(61 * time.Second)
	if got := fetches("/max-age.json", 0); got != 1 {
		t.Errorf("max-age=60 after 61s: fetched %d times, want 1 (stale, then cached again)", got)
	}
}

// A host that sends a little and then nothing does not hold the fetch
// past FetchTimeout.
func TestMetadataDocumentFetchIsTimeBounded(t *testing.T) {
	stop := make(chan struct{})
	s := newDocServer(t, map[string]func(http.ResponseWriter, string){
		"/slow.json": func(w http.ResponseWriter, self string) {
			w.Write([]byte(`{"client_id": `))
			w.(http.Flusher).Flush()
			<-stop
		},
	})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for the handler
	_, err := testFetcher(t, s, nil).Fetch(context.Background(), s.URL+"/slow.json")
	if err == nil || !strings.Contains(err.Error(), "not fetched within 5s") {
		t.Errorf("a stalled document: %v, want the fetch's timeout", err)
	}
}
