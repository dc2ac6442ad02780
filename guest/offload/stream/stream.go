// Package stream reads the send stream (Contract: Offload, Send stream): a
// tar (ustar or pax) of regular files, read in order, each member named in
// the contract's table and bounded by a limit of ours. Anything else (a
// member outside the table, an absolute path or one with "..", a link, a
// directory, a device, a member over its limit, a name twice, a truncated
// tar) stops the read with a *MemberError naming the member and the rule.
package stream

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Kinds of member.
const (
	Handover = "handover.md"
	EnvJSON  = "env.json"
	Bundle   = "offload.bundle"
	HEAD     = "HEAD"
	Index    = "index"
	Secret   = "secrets/"
)

// Limits of the members, in bytes. The hand-over's is the contract's
// (256 KiB); the others are ours: a secret is a key or a config file, and
// they all share a 64 MiB tmpfs.
var Limits = map[string]int64{
	Handover: 256 << 10,
	EnvJSON:  64 << 10,
	Bundle:   16 << 30,
	HEAD:     4 << 10,
	Index:    1 << 30,
	Secret:   1 << 20,
}

// MaxSecrets bounds all secrets of one stream together.
const MaxSecrets = 16 << 20

// Member is one member being read: Kind is one of the kinds above, Name
// its name in the stream, Rel (for a secret) its path under secrets/, Size
// its length in bytes and Mode the tar header's permission bits.
type Member struct {
	Kind, Name, Rel string
	Size            int64
	Mode            int64
}

// MemberError is a stream that breaks a rule; Member is empty when the
// tar itself is broken.
type MemberError struct {
	Member string
	Rule   string
}

func (e *MemberError) Error() string {
	if e.Member == "" {
		return "send stream: " + e.Rule
	}
	return fmt.Sprintf("send stream: member %q: %s", e.Member, e.Rule)
}

// Classify says which member a name is (its kind, and for a secret its
// path under secrets/), or why it is none: a *MemberError naming the rule.
func Classify(name string) (kind, rel string, err error) {
	if name == "" || strings.HasPrefix(name, "/") {
		return "", "", &MemberError{name, "an absolute or empty path"}
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "." || part == "" {
			return "", "", &MemberError{name, `a path with "..", "." or an empty part`}
		}
	}
	if strings.ContainsAny(name, "\x00\\") {
		return "", "", &MemberError{name, "a NUL or backslash in the path"}
	}
	switch name {
	case Handover, EnvJSON, Bundle, HEAD, Index:
		return name, "", nil
	}
	if rel, ok := strings.CutPrefix(name, Secret); ok && path.Clean(rel) == rel {
		return Secret, rel, nil
	}
	return "", "", &MemberError{name, "not a member of the send stream (handover.md, env.json, offload.bundle, HEAD, index, secrets/<entry>)"}
}

// Read reads the stream from r and calls fn for each member with a reader
// of exactly its content. fn must read it (or return an error); Read stops
// at fn's first error and returns it.
func Read(r io.Reader, fn func(Member, io.Reader) error) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	var secrets int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &MemberError{"", fmt.Sprintf("not a readable tar (ustar or pax): %v", err)}
		}
		kind, rel, err := Classify(h.Name)
		if err != nil {
			return err
		}
		// archive/tar reports a pre-POSIX regular file (flag NUL) as TypeReg too.
		if h.Typeflag != tar.TypeReg {
			return &MemberError{h.Name, "not a regular file (links, directories and devices are refused)"}
		}
		if seen[h.Name] {
			return &MemberError{h.Name, "appears twice"}
		}
		seen[h.Name] = true
		if h.Size < 0 || h.Size > Limits[kind] {
			return &MemberError{h.Name, fmt.Sprintf("%d bytes, over its limit of %d", h.Size, Limits[kind])}
		}
		if kind == Secret {
			if secrets += h.Size; secrets > MaxSecrets {
				return &MemberError{h.Name, fmt.Sprintf("the secrets together are over their limit of %d bytes", MaxSecrets)}
			}
		}
		m := Member{Kind: kind, Name: h.Name, Rel: rel, Size: h.Size, Mode: h.Mode}
		cr := &countReader{r: tr}
		if err := fn(m, cr); err != nil {
			return err
		}
		// Drain what fn left, so a short content is seen as a broken tar.
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return &MemberError{h.Name, fmt.Sprintf("truncated: %v", err)}
		}
		if cr.n != h.Size {
			return &MemberError{h.Name, fmt.Sprintf("truncated: %d of %d bytes", cr.n, h.Size)}
		}
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = &MemberError{"", "truncated tar"}
	}
	return n, err
}
