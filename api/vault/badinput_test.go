package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// TestBadInputStoresAndPushesNothing: each bad request is refused with an
// error naming the input and the rule, and leaves no row, audit row or push.
func TestBadInputStoresAndPushesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := f.store.Add(ctx, f.owner, ActorCLI, "TAKEN", openai, NewSecret("v")); err != nil {
		t.Fatal(err)
	}
	f.pushed = nil
	h := func(hosts ...string) Spec { return Spec{Hosts: hosts} }
	for _, tc := range []struct {
		name  string
		key   string
		spec  Spec
		value string
		want  string
	}{
		{"a NAME with a dot", "A.B", openai, "v", `"A.B" must be 1 to 64 of A-Za-z0-9_-`},
		{"a NAME with a space", "A B", openai, "v", "must be 1 to 64"},
		{"an empty NAME", "", openai, "v", "must be 1 to 64"},
		{"a duplicate NAME", "TAKEN", openai, "v", "a key of that name exists"},
		{"a reserved NAME", "LD_PRELOAD", openai, "v", "the box would refuse this key"},
		{"no host for a header key", "K", Spec{Header: "X-Api-Key"}, "v", "hosts: none"},
		{"no host at all", "K", Spec{}, "v", "hosts: none"},
		{"a host with a scheme", "K", h("https://api.openai.com"), "v", "has a scheme"},
		{"a host with a port", "K", h("api.openai.com:443"), "v", "has a port"},
		{"a host with a path", "K", h("api.openai.com/v1"), "v", "has a path"},
		{"a wildcard host", "K", h("*.openai.com"), "v", "is a wildcard"},
		{"a host with an underscore", "K", h("a_b.com"), "v", "not a DNS host name"},
		{"an IP literal with a port", "K", h("[::1]:443"), "v", "has a port"},
		{"a host twice", "K", h("a.com", "A.com"), "v", "given twice"},
		{"a header that is not a token", "K", Spec{Hosts: []string{"a.com"}, Header: "X Key"}, "v", "not an HTTP header name"},
		{"a header with a colon", "K", Spec{Hosts: []string{"a.com"}, Header: "X-Key:"}, "v", "not an HTTP header name"},
		{"the Host header", "K", Spec{Hosts: []string{"a.com"}, Header: "host"}, "v", "Host frames or routes"},
		{"the Content-Length header", "K", Spec{Hosts: []string{"a.com"}, Header: "Content-Length"}, "v", "Content-Length frames"},
		{"a template without {}", "K", Spec{Hosts: []string{"a.com"}, Template: "Bearer"}, "v", "holds {} 0 times"},
		{"a template with two {}", "K", Spec{Hosts: []string{"a.com"}, Template: "{} {}"}, "v", "holds {} 2 times"},
		{"a template with a newline", "K", Spec{Hosts: []string{"a.com"}, Template: "Bearer {}\n"}, "v", "printable ASCII only"},
		{"a template with ;", "K", Spec{Hosts: []string{"a.com"}, Template: "Bearer {};x"}, "v", "may not hold ';' or '%'"},
		{"a template with %", "K", Spec{Hosts: []string{"a.com"}, Template: "Bearer %{}"}, "v", "may not hold ';' or '%'"},
		{"a query with ;", "K", Spec{Hosts: []string{"a.com"}, Query: "key;x"}, "v", `"key;x" holds ';'`},
		{"a query and a header", "K", Spec{Hosts: []string{"a.com"}, Query: "key", Header: "X"}, "v", "not both"},
		{"a value with a newline", "K", openai, "abc\ndef", "holds a newline at byte 3"},
		{"a value with a CR", "K", openai, "abc\r", "holds a newline"},
		{"a value over 8 KiB", "K", openai, strings.Repeat("a", MaxValueLen+1), "8193 bytes, longer than 8192"},
		{"an empty value", "K", openai, "", "value: empty"},
		{"a value with a NUL", "K", openai, "a\x00b", "control byte 0x00"},
	} {
		_, err := f.store.Add(ctx, f.owner, ActorCLI, tc.key, tc.spec, NewSecret(tc.value))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.name != "a duplicate NAME" && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", tc.name, err)
		}
	}
	if _, err := f.store.Rotate(ctx, f.owner, ActorCLI, "TAKEN", NewSecret("a\nb")); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("rotate to a value with a newline: %v", err)
	}
	if _, err := f.store.Rotate(ctx, f.owner, ActorCLI, "TAKEN", NewSecret(strings.Repeat("a", MaxValueLen+1))); !errors.Is(err, ErrInvalid) {
		t.Errorf("rotate to a value over 8 KiB: %v", err)
	}
	if n := f.count(t, "SELECT (SELECT count(*) FROM vault_secrets) + (SELECT count(*) FROM vault_audit)"); n != 2 {
		t.Errorf("%d rows, want the one key and its create row", n)
	}
	if len(f.pushed) != 0 {
		t.Errorf("bad input pushed %d times", len(f.pushed))
	}
	if n := f.count(t, "SELECT count(*) FROM vault_secrets WHERE rotated_at IS NOT NULL"); n != 0 {
		t.Error("a refused rotation rotated")
	}
}

func TestHowAndRecord(t *testing.T) {
	for _, tc := range []struct {
		spec       Spec
		how, value string
	}{
		{Spec{Hosts: []string{"API.OpenAI.com."}}, "Authorization: Bearer {}", "Bearer V"},
		{Spec{Hosts: []string{"a.com"}, Header: "x-api-key"}, "X-Api-Key: {}", "V"},
		{Spec{Hosts: []string{"a.com"}, Template: "Basic {}"}, "Authorization: Basic {}", "Basic V"},
		{Spec{Hosts: []string{"a.com"}, Query: "key"}, "?key={}", "V"},
	} {
		_, how, err := tc.spec.How()
		if err != nil || how != tc.how || render(how, "V") != tc.value {
			t.Errorf("%+v: how %q (%v), rendered %q; want %q, %q", tc.spec, how, err, render(how, "V"), tc.how, tc.value)
		}
	}
	if r := Record("K", "p", []string{"a.com", "b.com"}, "X: a;b {}%"); r != "K=p;a.com,b.com;X:%20a%3Bb%20{}%25" {
		t.Errorf("record %q", r)
	}
}

// TestEveryAcceptedKeyPassesTheSupervisorsCheck: a key the vault accepts
// makes entries sandbox.CheckClaimEnv accepts (else every push and boot
// of the owner's boxes would fail on it); a template with ';' or '%' was
// accepted and refused by the supervisor.
func TestEveryAcceptedKeyPassesTheSupervisorsCheck(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	accepted := 0
	for i, spec := range []Spec{
		{Hosts: []string{"a.com"}},
		{Hosts: []string{"a.com", "b.a.com"}, Header: "X-Api-Key"},
		{Hosts: []string{"a.com"}, Template: "Basic {}"},
		{Hosts: []string{"a.com"}, Header: "X-Key", Template: "token={} (v1)"},
		{Hosts: []string{"a.com"}, Template: "Bearer {};v=1"},
		{Hosts: []string{"a.com"}, Template: "100% {}"},
		{Hosts: []string{"a.com"}, Query: "api_key"},
	} {
		name := fmt.Sprintf("K%d", i)
		if _, err := f.store.Add(ctx, f.owner, ActorCLI, name, spec, NewSecret("sk-x y")); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%+v: %v", spec, err)
			}
			continue
		}
		accepted++
		records, host, err := f.store.Entries(ctx, f.owner)
		if err != nil {
			t.Fatal(err)
		}
		entries := append([]sandbox.ClaimEntry{{Name: "COCOONBOX_VAULT", Value: records, Guest: true}}, host...)
		if err := sandbox.CheckClaimEnv(entries); err != nil {
			t.Errorf("%+v: accepted, but the supervisor refuses its entries: %v", spec, err)
			f.store.Delete(ctx, f.owner, ActorCLI, name)
		}
	}
	if accepted < 5 {
		t.Fatalf("only %d keys accepted", accepted)
	}
}
