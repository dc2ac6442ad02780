package client

import (
	"errors"
	"fmt"
	"net/textproto"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/hostname"
)

// The grammar of a key of the vault (Contract: Key vault; Box API keys),
// shared so that cocoonbox keys refuses a bad NAME, --host, --header,
// --template or --query before any call (and before it asks for the
// value) with the rule api/vault checks with.

// ErrInvalid marks bad input; an *InputError says which field and rule.
var ErrInvalid = errors.New("invalid")

// InputError is a field of a request that breaks a rule. Field is the
// request's name of it (name, hosts[0], header, template, query, value).
type InputError struct {
	Field string
	Rule  string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *InputError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// MaxKeyValue is the longest value of a key, in bytes (8 KiB).
const MaxKeyValue = 8 << 10

// DefaultKeyHeader and DefaultKeyTemplate are how a key is sent when the
// request names neither a header nor a query parameter.
const (
	DefaultKeyHeader   = "Authorization"
	DefaultKeyTemplate = "Bearer {}"
)

var (
	keyNameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	tokenRule   = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$") // RFC 9110 token
	paramRule   = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
)

// forbiddenHeaders frame or route the request: a key in one would let the
// box's placeholder rewrite where or how much is sent.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authorization": true,
}

// KeyNameRule is CheckKeyName's rule as a refusal states it, after the
// quoted name.
const KeyNameRule = "must be 1 to 64 of A-Za-z0-9_-"

// CheckKeyName checks a key's NAME (KeyNameRule).
func CheckKeyName(name string) error {
	if !keyNameRule.MatchString(name) {
		return invalid("name", "%q %s", name, KeyNameRule)
	}
	return nil
}

// CheckKeyValue checks a key's value: 1 byte to MaxKeyValue, printable (no newline,
// no control byte: it goes into a header or a query).
func CheckKeyValue(v string) error {
	if v == "" {
		return invalid("value", "empty: give the key's value (on stdin or at the prompt)")
	}
	if len(v) > MaxKeyValue {
		return invalid("value", "%d bytes, longer than %d (8 KiB)", len(v), MaxKeyValue)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\n' || c == '\r':
			return invalid("value", "holds a newline at byte %d: a key is one line", i)
		case c < 0x20 || c == 0x7f:
			return invalid("value", "holds control byte 0x%02x at byte %d", c, i)
		}
	}
	return nil
}

// checkHost checks one host: a DNS name, no scheme, port, path or
// wildcard (the contract's records carry host names only). It answers the
// host lower-cased.
func checkHost(i int, h string) (string, error) {
	field := fmt.Sprintf("hosts[%d]", i)
	switch {
	case h == "":
		return "", invalid(field, "empty")
	case strings.Contains(h, "://"):
		return "", invalid(field, "%q has a scheme: give the host name only (api.openai.com)", h)
	case strings.Contains(h, "/"):
		return "", invalid(field, "%q has a path: give the host name only", h)
	case strings.Contains(h, ":"):
		return "", invalid(field, "%q has a port: give the host name only (keys are sent over HTTPS, port 443)", h)
	case strings.Contains(h, "*"):
		return "", invalid(field, "%q is a wildcard: the contract allows none; name each host", h)
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if !hostname.Valid(h) {
		return "", invalid(field, "%q is not %s", h, hostname.Rule)
	}
	return h, nil
}

// KeySpec is how a key is sent: its hosts and a header with a template,
// or a query parameter.
type KeySpec struct {
	Hosts    []string
	Header   string
	Template string
	Query    string
}

// How checks s and answers its hosts (lower-cased) and how, decoded as a
// guest/vault record's ("Authorization: Bearer {}" or "?key={}"); bad
// input is an *InputError naming the request's field (hosts[i], header,
// template, query).
func (s KeySpec) How() ([]string, string, error) {
	if len(s.Hosts) == 0 {
		return nil, "", invalid("hosts", "none: name at least one host the key is sent to (--host)")
	}
	hosts := make([]string, 0, len(s.Hosts))
	seen := map[string]bool{}
	for i, h := range s.Hosts {
		h, err := checkHost(i, h)
		if err != nil {
			return nil, "", err
		}
		if seen[h] {
			return nil, "", invalid(fmt.Sprintf("hosts[%d]", i), "%q is given twice", h)
		}
		seen[h] = true
		hosts = append(hosts, h)
	}
	if s.Query != "" {
		if s.Header != "" || s.Template != "" {
			return nil, "", invalid("query", "a key is sent in a query parameter or in a header, not both (--query, or --header/--template)")
		}
		if strings.Contains(s.Query, ";") {
			return nil, "", invalid("query", "%q holds ';'", s.Query)
		}
		if !paramRule.MatchString(s.Query) {
			return nil, "", invalid("query", "%q must be of A-Za-z0-9._~-", s.Query)
		}
		return hosts, "?" + s.Query + "={}", nil
	}
	header, tmpl := s.Header, s.Template
	if header == "" {
		header = DefaultKeyHeader
	}
	if !tokenRule.MatchString(header) {
		return nil, "", invalid("header", "%q is not an HTTP header name (a token: letters, digits, !#$%%&'*+-.^_`|~)", header)
	}
	header = textproto.CanonicalMIMEHeaderKey(header)
	if forbiddenHeaders[header] {
		return nil, "", invalid("header", "%s frames or routes the request: a key cannot go there", header)
	}
	if tmpl == "" {
		tmpl = "{}"
		if header == DefaultKeyHeader {
			tmpl = DefaultKeyTemplate
		}
	}
	if n := strings.Count(tmpl, "{}"); n != 1 {
		return nil, "", invalid("template", "%q holds {} %d times: it must hold it once, where the value goes", tmpl, n)
	}
	for i := 0; i < len(tmpl); i++ {
		if c := tmpl[i]; c < 0x20 || c >= 0x7f {
			return nil, "", invalid("template", "holds byte 0x%02x at %d: printable ASCII only", c, i)
		}
	}
	// The supervisor checks a host entry's how as a raw record field
	// (sandbox.CheckClaimEnv), where ';' ends the field and '%' starts an
	// escape: such a template would make every push and boot fail.
	if i := strings.IndexAny(tmpl, ";%"); i >= 0 {
		return nil, "", invalid("template", "%q holds %q: a template may not hold ';' or '%%'", tmpl, tmpl[i])
	}
	return hosts, header + ": " + tmpl, nil
}
