// The envelope (envelope.go) parses the request-spool envelopes of a tool-request
// lease (Contract: BranchBox managed runtime manifest, "The request
// envelope has only these top-level fields"): the consumer's request, its
// capability-stripped canonical form and SHA-256 fingerprint that the
// replay record keeps, and the endpoint's correlated response. Every
// refusal is a *branchbox.RuleError and terminal: a malformed or
// mismatched envelope never becomes the retryable "not-pending".

package toolrequest

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// MaxRequest is the spool's per-request quota (Security contract: 256 KiB
// per request); a response is held to the same bound.
const MaxRequest = 256 << 10

// Version is the one envelope version.
const Version = "1"

// Binding is what a request must match: the signed run, lease and
// consumer, the request id its file name carries, and the spool's
// endpoint-only capability.
type Binding struct {
	RunID, LeaseID, Consumer, RequestID string
	Capability                          []byte
}

// Request is a parsed request. Payload is opaque to BranchBox: a JSON
// object, kept compact.
type Request struct {
	Version   string          `json:"version"`
	RunID     string          `json:"run_id"`
	LeaseID   string          `json:"lease_id"`
	Consumer  string          `json:"consumer"`
	RequestID string          `json:"request_id"`
	Payload   json.RawMessage `json:"payload"`
}

// Response is the endpoint's answer: the request's ids and an opaque
// payload (a tool-level decline is still a successful transport).
type Response = Request

var requestFields = []string{"version", "run_id", "lease_id", "consumer", "request_id", "capability", "payload"}

// parseRequest parses one request file's bytes against b: at most
// MaxRequest bytes of UTF-8, one JSON object with exactly the envelope's
// seven top-level fields, each once, the ids JSON strings, the payload a
// JSON object; version "1", run, lease, consumer and request id equal to
// b's, the capability equal to b's (compared in constant time, rule
// request-capability). Other refusals are rule request-envelope.
func parseRequest(data []byte, b Binding) (*Request, error) {
	fields, err := object(data, requestFields, "request "+b.RequestID)
	if err != nil {
		return nil, err
	}
	r, err := envelope(fields, "request "+b.RequestID)
	if err != nil {
		return nil, err
	}
	var capability string
	if err := str(fields, "capability", &capability, "request "+b.RequestID); err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(capability), b.Capability) != 1 || len(b.Capability) == 0 {
		return nil, branchbox.Refuse(branchbox.RuleRequestCapability, "request "+b.RequestID, "does not carry the spool's capability")
	}
	want := Request{Version: Version, RunID: b.RunID, LeaseID: b.LeaseID, Consumer: b.Consumer, RequestID: b.RequestID}
	if err := same(r, &want, "request "+b.RequestID, branchbox.RuleRequestEnvelope); err != nil {
		return nil, err
	}
	return r, nil
}

// parseResponse parses one response frame (without its newline) for req:
// the same strictness, exactly the fields of a request but the capability,
// and the same version, run, lease, consumer and request id (rule
// response-correlation).
func parseResponse(data []byte, req *Request) (*Response, error) {
	where := "response to " + req.RequestID
	fields, err := object(data, requestFields[:5:5], where, "payload")
	if err != nil {
		return nil, err
	}
	r, err := envelope(fields, where)
	if err != nil {
		return nil, err
	}
	if err := same(r, req, where, branchbox.RuleResponseCorrelation); err != nil {
		return nil, err
	}
	return r, nil
}

// Canonical is the capability-stripped canonical request the replay
// record keeps: the fields in envelope order, compact, the payload as
// parsed (compact).
func (r *Request) Canonical() []byte {
	out, _ := marshalEnvelope(r) // strings and a valid compact object: cannot fail
	return out
}

// marshalEnvelope is json.Marshal without its HTML escaping: '&', '<' and '>'
// stay the bytes the consumer or the endpoint wrote (json.Marshal makes
// them \u0026, \u003c, \u003e), so what BranchBox relays, records and
// answers is byte-exact.
func marshalEnvelope(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Frame is the request as relayed to the endpoint: the seven fields in
// envelope order, compact, with the spool's capability (which authorizes
// the request to the endpoint; Canonical leaves it out of the replay
// record). No newline: the relay adds the frame's one.
func (r *Request) Frame(capability []byte) []byte {
	out, _ := marshalEnvelope(struct {
		Version    string          `json:"version"`
		RunID      string          `json:"run_id"`
		LeaseID    string          `json:"lease_id"`
		Consumer   string          `json:"consumer"`
		RequestID  string          `json:"request_id"`
		Capability string          `json:"capability"`
		Payload    json.RawMessage `json:"payload"`
	}{r.Version, r.RunID, r.LeaseID, r.Consumer, r.RequestID, string(capability), r.Payload})
	return out
}

// Fingerprint is the lowercase hex SHA-256 of Canonical.
func (r *Request) Fingerprint() string {
	sum := sha256.Sum256(r.Canonical())
	return hex.EncodeToString(sum[:])
}

// same compares the ids of got with want under rule.
func same(got, want *Request, where string, rule branchbox.Rule) error {
	for _, f := range []struct{ name, got, want string }{
		{"version", got.Version, want.Version}, {"run_id", got.RunID, want.RunID}, {"lease_id", got.LeaseID, want.LeaseID},
		{"consumer", got.Consumer, want.Consumer}, {"request_id", got.RequestID, want.RequestID},
	} {
		if f.got != f.want {
			return branchbox.Refuse(rule, where, "has %s %q, want %q", f.name, f.got, f.want)
		}
	}
	return nil
}

// envelope reads the fields every envelope has.
func envelope(fields map[string]json.RawMessage, where string) (*Request, error) {
	r := &Request{}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"version", &r.Version}, {"run_id", &r.RunID}, {"lease_id", &r.LeaseID}, {"consumer", &r.Consumer}, {"request_id", &r.RequestID}} {
		if err := str(fields, f.name, f.dst, where); err != nil {
			return nil, err
		}
	}
	if !branchbox.ValidRequestID(r.RequestID) {
		return nil, branchbox.Refuse(branchbox.RuleRequestEnvelope, where, "request_id %q is not [A-Za-z0-9][A-Za-z0-9_.-]{0,127}", r.RequestID)
	}
	p := bytes.TrimLeft(fields["payload"], " \t\r\n")
	if len(p) == 0 || p[0] != '{' {
		return nil, branchbox.Refuse(branchbox.RuleRequestEnvelope, where, "payload is not a JSON object")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, p); err != nil {
		return nil, branchbox.Refuse(branchbox.RuleRequestEnvelope, where, "payload is not JSON: %v", err)
	}
	r.Payload = compact.Bytes()
	return r, nil
}

// str decodes field name, which must be a JSON string (not null).
func str(fields map[string]json.RawMessage, name string, dst *string, where string) error {
	raw := bytes.TrimLeft(fields[name], " \t\r\n")
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
		return branchbox.Refuse(branchbox.RuleRequestEnvelope, where, "%s is not a JSON string", name)
	}
	return nil
}

// object splits data into its top-level fields: at most MaxRequest bytes
// of UTF-8, one object, keys exactly those listed (byte for byte, no
// case folding), each once, all present, nothing after the object.
func object(data []byte, names []string, where string, more ...string) (map[string]json.RawMessage, error) {
	bad := func(detail string, args ...any) error {
		return branchbox.Refuse(branchbox.RuleRequestEnvelope, where, detail, args...)
	}
	if len(data) > MaxRequest {
		return nil, bad("is larger than %d bytes", MaxRequest)
	}
	if !utf8.Valid(data) {
		return nil, bad("is not UTF-8")
	}
	known := map[string]bool{}
	for _, n := range append(names, more...) {
		known[n] = true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, bad("is not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad("is not JSON: %v", err)
		}
		key, _ := t.(string)
		// Byte-exact: a key written with an escape ("run\u005fid")
		// ends in the input with more than its decoded spelling.
		if end := int(dec.InputOffset()); end < len(key)+2 || string(data[end-len(key)-2:end]) != `"`+key+`"` {
			return nil, bad("has the field %q written with an escape; keys are byte-exact", key)
		}
		if !known[key] {
			return nil, bad("has the field %q; an envelope has only its own", key)
		}
		if _, dup := fields[key]; dup {
			return nil, bad("has the field %q twice", key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, bad("is not JSON: %v", err)
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad("has data after its object")
	}
	for n := range known {
		if _, ok := fields[n]; !ok {
			return nil, bad("has no %s", n)
		}
	}
	return fields, nil
}
