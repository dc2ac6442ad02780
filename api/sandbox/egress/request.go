package egress

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
)

// interception serves the requests of one intercepted CONNECT: the box
// that asked (its bridge address), the host it named (canonicalHost) and
// the host:port dialled. Each request reads the box's keys again
// (Config.Injections), so a key deleted or rotated in the api reaches a
// connection already open at its next request.
type interception struct {
	p        *Proxy
	box      netip.Addr
	host     string
	hostport string
	serve    http.Handler // the reverse proxy to the upstream
}

// requestKeys is the context key of a request's keys (*keys).
type requestKeys struct{}

// keys are the injections read for one request and the values its
// answer is cleaned of.
type keys struct {
	inj []Injection
	v   *values
}

func keysOf(ctx context.Context) *keys {
	if k, ok := ctx.Value(requestKeys{}).(*keys); ok {
		return k
	}
	return &keys{v: &values{}}
}

// ServeHTTP refuses a request naming another host than the connection's
// with 421 Misdirected Request, and proxies any other with the keys the
// box has for the host now, its answer's headers (1xx and trailers too)
// cleaned of their values.
func (x *interception) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := x.misdirected(r); err != nil {
		x.p.logf("egress intercepted request refused", "target", x.hostport, "err", err)
		http.Error(w, "cocoonbox egress proxy: "+err.Error(), http.StatusMisdirectedRequest)
		return
	}
	inj := x.p.boxInjections(x.box, x.host)
	k := &keys{inj: inj, v: newValues(inj)}
	x.serve.ServeHTTP(&scrubWriter{ResponseWriter: w, v: k.v}, r.WithContext(context.WithValue(r.Context(), requestKeys{}, k)))
	k.v.header(w.Header()) // the trailers, sent when this returns
}

// misdirected says why r names another host than the one the connection
// was opened for (the CONNECT's, which the TLS server name was held to),
// port aside: its Host (HTTP/1.1) or :authority (HTTP/2), the host of an
// absolute-form request URI, and any Host field besides. A key's value
// goes to the host it lists and no other: a front end that routes by
// Host (a CDN, a shared load balancer) would take it elsewhere.
func (x *interception) misdirected(r *http.Request) error {
	names := append([]string{r.Host, r.URL.Host}, r.Header.Values("Host")...)
	for i, n := range names {
		if i == 1 && n == "" {
			continue // an origin-form URI names no host
		}
		if canonicalHost(n) != x.host {
			return fmt.Errorf("misdirected request: it names host %q on a connection opened (CONNECT and TLS server name) for %q; a key goes only to the host its connection was opened for", n, x.host)
		}
	}
	return nil
}

// answer cleans the body of an answer of the request's key values, in
// its first Config.ScrubBodyLimit bytes, and drops its Content-Length
// (the body is streamed chunked, or until the close for HTTP/1.0). A
// body with a Content-Encoding other than identity is left as it came
// (the request asked for identity: an upstream that ignored it is
// logged), and so is a 101's upgraded stream.
func (x *interception) answer(resp *http.Response) error {
	k := keysOf(resp.Request.Context())
	limit := x.p.cfg.ScrubBodyLimit
	if len(k.v.pairs) == 0 || limit < 0 || resp.Request.Method == http.MethodHead ||
		resp.StatusCode < 200 || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		x.p.logf("egress: an answer's body is encoded: not cleaned of key values", "target", x.hostport, "content-encoding", enc)
		return nil
	}
	if limit == 0 {
		limit = DefaultScrubBodyLimit
	}
	resp.Body = newScrubBody(resp.Body, k.v, limit)
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return nil
}

// scrubWriter cleans the header of each answer the box is sent (a 1xx
// one too) when it is written.
type scrubWriter struct {
	http.ResponseWriter
	v     *values
	wrote bool
}

func (w *scrubWriter) WriteHeader(code int) {
	w.v.header(w.Header())
	w.wrote = w.wrote || code >= 200
	w.ResponseWriter.WriteHeader(code)
}

func (w *scrubWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// and the Hijack of an upgrade).
func (w *scrubWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
