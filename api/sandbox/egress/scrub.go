package egress

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// DefaultScrubBodyLimit is Config.ScrubBodyLimit's default: the first
// MiB of each answer's body is cleaned of the values.
const DefaultScrubBodyLimit = 1 << 20

// pair is one form of a key's value and the same form of its
// placeholder, which takes its place in an answer to the box.
type pair struct{ value, placeholder []byte }

// values are the forms of a request's key values that an answer going
// back to the box is cleaned of (Contract: Key vault: a value goes in
// once and never comes back out): each value as sent and, for a header
// key, the bare value inside its template ("Bearer {}": the part in
// place of {}), each as is, URL-escaped (query and path) and in base64
// (standard and URL alphabets, with and without padding). Each is
// replaced by the same form of the placeholder, the longest first, so
// the box sees what it would have seen had the upstream been sent the
// placeholder. The zero values clean nothing.
type values struct {
	pairs   []pair // the longest value first
	first   [256]bool
	longest int
}

// newValues are the forms of the values of inj.
func newValues(inj []Injection) *values {
	v := &values{}
	seen := map[string]bool{}
	add := func(value, placeholder string) {
		forms := []func(string) string{
			func(s string) string { return s },
			url.QueryEscape, url.PathEscape,
			func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
			func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) },
			func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) },
			func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
		}
		for _, f := range forms {
			fv, fp := f(value), f(placeholder)
			if fv == "" || fv == fp || seen[fv] {
				continue
			}
			seen[fv] = true
			v.pairs = append(v.pairs, pair{[]byte(fv), []byte(fp)})
		}
	}
	for _, in := range inj {
		_, tmpl, header := strings.Cut(in.How, ":")
		if strings.HasPrefix(in.How, "?") || !header {
			add(in.Value, in.Placeholder)
			continue
		}
		// The header's whole value is the template applied to the bare
		// value: its placeholder is the template applied to the
		// placeholder.
		prefix, suffix, _ := strings.Cut(strings.TrimSpace(tmpl), "{}")
		add(in.Value, prefix+in.Placeholder+suffix)
		if len(in.Value) > len(prefix)+len(suffix) && strings.HasPrefix(in.Value, prefix) && strings.HasSuffix(in.Value, suffix) {
			add(in.Value[len(prefix):len(in.Value)-len(suffix)], in.Placeholder)
		}
	}
	sort.SliceStable(v.pairs, func(i, j int) bool { return len(v.pairs[i].value) > len(v.pairs[j].value) })
	for _, p := range v.pairs {
		v.first[p.value[0]] = true
		v.longest = max(v.longest, len(p.value))
	}
	return v
}

// scrub appends in, cleaned, to dst, looking for a value's start at
// positions before stop only (the bytes from stop on are copied as they
// are), and answers how many bytes of in it used: all of them when eof,
// else all but a tail that may be the start of a value the next bytes
// complete (shorter than the longest value).
func (v *values) scrub(dst, in []byte, stop int, eof bool) ([]byte, int) {
	i := 0
next:
	for i < len(in) && i < stop {
		if v.first[in[i]] {
			rest := in[i:]
			for _, p := range v.pairs {
				if bytes.HasPrefix(rest, p.value) {
					dst = append(dst, p.placeholder...)
					i += len(p.value)
					continue next
				}
				if !eof && len(rest) < len(p.value) && bytes.HasPrefix(p.value, rest) {
					return dst, i
				}
			}
		}
		dst = append(dst, in[i])
		i++
	}
	return append(dst, in[i:]...), len(in)
}

// string answers s cleaned.
func (v *values) string(s string) string {
	if len(v.pairs) == 0 {
		return s
	}
	out, _ := v.scrub(nil, []byte(s), len(s), true)
	return string(out)
}

// header cleans every value of h in place (names are left: a value
// there would be no header the box could use).
func (v *values) header(h http.Header) {
	if len(v.pairs) == 0 {
		return
	}
	for _, vs := range h {
		for i, s := range vs {
			vs[i] = v.string(s)
		}
	}
}

// scrubBody is an answer's body cleaned of the values in its first left
// bytes, streamed: a value split across reads is held (at most the
// longest value less a byte) until the next read completes or refutes it.
type scrubBody struct {
	r    io.ReadCloser
	v    *values
	left int64  // bytes still looked at for a value's start
	in   []byte // read, not yet cleaned
	out  []byte // cleaned, not yet returned
	ob   []byte // out's whole buffer
	buf  []byte
	err  error
}

func newScrubBody(r io.ReadCloser, v *values, limit int64) *scrubBody {
	return &scrubBody{r: r, v: v, left: limit, buf: make([]byte, 32<<10)}
}

func (b *scrubBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		n, err := b.r.Read(b.buf)
		b.in = append(b.in, b.buf[:n]...)
		b.err = err
		stop := len(b.in)
		if int64(stop) > b.left {
			stop = int(b.left)
		}
		var used int
		b.out, used = b.v.scrub(b.ob[:0], b.in, stop, err != nil)
		b.ob = b.out
		b.left -= int64(min(used, stop))
		b.in = append(b.in[:0], b.in[used:]...)
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *scrubBody) Close() error { return b.r.Close() }
