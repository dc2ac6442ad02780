package toolrequest

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

var binding = Binding{RunID: "run-id", LeaseID: "delivery_requests", Consumer: "coding-agent", RequestID: "artifact-delivery", Capability: []byte("endpoint-only-random-value")}

const goodRequest = `{"version": "1", "run_id": "run-id", "lease_id": "delivery_requests", "consumer": "coding-agent",
 "request_id": "artifact-delivery", "capability": "endpoint-only-random-value", "payload": {"b": [1, 2], "a": "x"}}`

const goodResponse = `{"version":"1","run_id":"run-id","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"artifact-delivery","payload":{"declined":true}}`

// TestRequestAndResponseAccepted is the control case, and the canonical
// form drops the capability (the replay record never holds it).
func TestRequestAndResponseAccepted(t *testing.T) {
	r, err := parseRequest([]byte(goodRequest), binding)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":"1","run_id":"run-id","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"artifact-delivery","payload":{"b":[1,2],"a":"x"}}`
	if got := string(r.Canonical()); got != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	if len(r.Fingerprint()) != 64 {
		t.Fatalf("fingerprint %q", r.Fingerprint())
	}
	if _, err := parseResponse([]byte(goodResponse), r); err != nil {
		t.Fatalf("a correlated decline is a successful transport: %v", err)
	}
}

// TestChangedRequestChangesFingerprint: a same-id request with another
// payload is another fingerprint (a changed request is terminal).
func TestChangedRequestChangesFingerprint(t *testing.T) {
	a, _ := parseRequest([]byte(goodRequest), binding)
	b, err := parseRequest([]byte(strings.Replace(goodRequest, `"a": "x"`, `"a": "y"`, 1)), binding)
	if err != nil || a.Fingerprint() == b.Fingerprint() {
		t.Fatalf("changed payload: %v, fingerprints %s %s", err, a.Fingerprint(), b.Fingerprint())
	}
}

// TestHostileRequests: each refused, terminally, by its rule.
func TestHostileRequests(t *testing.T) {
	cases := []struct {
		name, data string
		rule       branchbox.Rule
	}{
		{"extra top-level field", strings.Replace(goodRequest, `"payload"`, `"extra": 1, "payload"`, 1), branchbox.RuleRequestEnvelope},
		{"field twice", strings.Replace(goodRequest, `"payload"`, `"consumer": "coding-agent", "payload"`, 1), branchbox.RuleRequestEnvelope},
		{"case-folded key", strings.Replace(goodRequest, `"run_id"`, `"RUN_ID"`, 1), branchbox.RuleRequestEnvelope},
		// Issue 38, Deliver 4: keys are byte-exact; run\u005fid was run_id.
		{"key run\\u005fid spelled with an escape", strings.Replace(goodRequest, `"run_id"`, `"run\u005fid"`, 1), branchbox.RuleRequestEnvelope},
		{"missing field", strings.Replace(goodRequest, `"version": "1", `, ``, 1), branchbox.RuleRequestEnvelope},
		{"null id", strings.Replace(goodRequest, `"consumer": "coding-agent"`, `"consumer": null`, 1), branchbox.RuleRequestEnvelope},
		{"number version", strings.Replace(goodRequest, `"version": "1"`, `"version": 1`, 1), branchbox.RuleRequestEnvelope},
		{"other version", strings.Replace(goodRequest, `"version": "1"`, `"version": "2"`, 1), branchbox.RuleRequestEnvelope},
		{"other run", strings.Replace(goodRequest, `"run_id": "run-id"`, `"run_id": "run-other"`, 1), branchbox.RuleRequestEnvelope},
		{"other lease", strings.Replace(goodRequest, `"lease_id": "delivery_requests"`, `"lease_id": "x"`, 1), branchbox.RuleRequestEnvelope},
		{"other consumer", strings.Replace(goodRequest, `"consumer": "coding-agent"`, `"consumer": "other"`, 1), branchbox.RuleRequestEnvelope},
		{"id not the file's", strings.Replace(goodRequest, `"request_id": "artifact-delivery"`, `"request_id": "other"`, 1), branchbox.RuleRequestEnvelope},
		{"wrong capability", strings.Replace(goodRequest, `endpoint-only-random-value`, `endpoint-only-random-valuE`, 1), branchbox.RuleRequestCapability},
		{"payload not an object", strings.Replace(goodRequest, `{"b": [1, 2], "a": "x"}`, `"x"`, 1), branchbox.RuleRequestEnvelope},
		{"not JSON", `{"version": `, branchbox.RuleRequestEnvelope},
		{"an array", `[1]`, branchbox.RuleRequestEnvelope},
		{"data after", goodRequest + ` {}`, branchbox.RuleRequestEnvelope},
		{"not UTF-8", strings.Replace(goodRequest, `"a": "x"`, "\"a\": \"\xff\"", 1), branchbox.RuleRequestEnvelope},
		{"over 256 KiB", strings.Replace(goodRequest, `"a": "x"`, `"a": "`+strings.Repeat("x", MaxRequest)+`"`, 1), branchbox.RuleRequestEnvelope},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseRequest([]byte(c.data), binding)
			if branchbox.RuleOf(err) != c.rule {
				t.Fatalf("got %v, want rule %s", err, c.rule)
			}
		})
	}
}

// TestHostileResponses: a response for another request, with a
// capability or extra fields, or not JSON, is refused by rule.
func TestHostileResponses(t *testing.T) {
	req, err := parseRequest([]byte(goodRequest), binding)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, data string
		rule       branchbox.Rule
	}{
		{"another request id", strings.Replace(goodResponse, `"request_id":"artifact-delivery"`, `"request_id":"other"`, 1), branchbox.RuleResponseCorrelation},
		{"another consumer", strings.Replace(goodResponse, `"consumer":"coding-agent"`, `"consumer":"x"`, 1), branchbox.RuleResponseCorrelation},
		{"echoes a capability", strings.Replace(goodResponse, `"payload"`, `"capability":"c","payload"`, 1), branchbox.RuleRequestEnvelope},
		{"non-JSON frame", `ok`, branchbox.RuleRequestEnvelope},
		{"no payload", strings.Replace(goodResponse, `,"payload":{"declined":true}`, ``, 1), branchbox.RuleRequestEnvelope},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseResponse([]byte(c.data), req)
			if branchbox.RuleOf(err) != c.rule {
				t.Fatalf("got %v, want rule %s", err, c.rule)
			}
		})
	}
}

// FuzzParseRequest: no input panics; an accepted request's canonical form
// with the capability put back parses to the same fingerprint.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(goodRequest))
	f.Add([]byte(`{"version":"1","payload":{}}`))
	f.Add([]byte(`{"version":"1","version":"1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseRequest(data, binding)
		if err != nil {
			if branchbox.RuleOf(err) == "" {
				t.Fatalf("refusal without a rule: %v", err)
			}
			return
		}
		c := r.Canonical()
		again := append([]byte(`{"capability":"endpoint-only-random-value",`), c[1:]...)
		r2, err := parseRequest(again, binding)
		if err != nil || r2.Fingerprint() != r.Fingerprint() {
			t.Fatalf("canonical %s does not parse back to the same request: %v", c, err)
		}
	})
}

// TestFrameCarriesTheCapability: the relayed frame is the request with the
// capability, one line, and parses back to the same canonical request.
func TestFrameCarriesTheCapability(t *testing.T) {
	r, _ := parseRequest([]byte(goodRequest), binding)
	frame := r.Frame(binding.Capability)
	back, err := parseRequest(frame, binding)
	if err != nil || string(back.Canonical()) != string(r.Canonical()) || strings.ContainsAny(string(frame), "\n\r") {
		t.Fatalf("frame %s: %v", frame, err)
	}
}
