package offload

import (
	"errors"
	"strings"
	"testing"
)

// Bad input: each bad request is an *Error with code invalid naming the
// rule (Contract: Offload, Inbox: errors are {"ok":false,"code","error"}).
func TestParseRequestRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`not json`, "one JSON object"},
		{`{"op":"send"`, "not valid JSON"},
		{`{"op":"read","repo":"k"} {"op":"read"}`, "more follows"},
		{`{"op":"dance","repo":"k"}`, `unknown op "dance"`},
		{`{"repo":"k"}`, "no op"},
		{`{"op":"read","repo":"BAD KEY"}`, "repo key"},
		{`{"op":"read","repo":"k","wait_ms":600001}`, "wait_ms"},
		{`{"op":"read","repo":"k","since":-1}`, "since"},
		{`{"op":"post","repo":"k","kind":"gossip"}`, "post kind"},
		{`{"op":"event","repo":"k","cli":"vim","hook":"Stop"}`, "cli"},
		{`{"op":"send","repo":"k","start":true,"name":"../x","cli":"claude","body":"b"}`, "name"},
		{`{"op":"send","repo":"k","offload_id":"a b"}`, "offload id"},
		{`{"op":"read","repo":"k","body":"` + strings.Repeat("x", MaxRequest) + `"}`, "over the limit"},
	} {
		_, err := ParseRequest([]byte(tc.line))
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalid || !strings.Contains(e.Msg, tc.want) {
			t.Errorf("%.60s: got %v, want invalid with %q", tc.line, err, tc.want)
		}
	}
	if _, err := ParseRequest([]byte(`{"op":"event","repo":"k","cli":"claude","hook":"Stop","payload":{"reason":"x"}}`)); err != nil {
		t.Errorf("a good event refused: %v", err)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"op":"send","repo":"k","body":"hi"}`))
	f.Add([]byte(`{"op":"read","repo":"k","since":3,"wait_ms":100}`))
	f.Add([]byte(`{"op":"event","repo":"k","cli":"codex","hook":"notify","payload":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRequest(line)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalid {
				t.Fatalf("error %v is not an invalid *Error", err)
			}
			return
		}
		if r.Op != "rescan" && r.Op != "watch" && r.Op != "status" && CheckRepoKey(r.Repo) != nil {
			t.Fatalf("op %s passed with repo %q", r.Op, r.Repo)
		}
	})
}
