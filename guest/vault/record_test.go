package vault

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParseRecordAccepts(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Record
	}{
		{"OPENAI_API_KEY=sk-proj-cbv_0123456789abcdef0123456789abcdef;api.openai.com;Authorization:%20Bearer%20{}",
			Record{Name: "OPENAI_API_KEY", Placeholder: "sk-proj-cbv_0123456789abcdef0123456789abcdef",
				Hosts: []string{"api.openai.com"}, How: "Authorization: Bearer {}", Exported: true}},
		{"LINK_NO_REFRESH=1;;", Record{Name: "LINK_NO_REFRESH", Placeholder: "1", Exported: true}},
		{"MAPS=cbv_x;maps.googleapis.com,www.googleapis.com;?key={}",
			Record{Name: "MAPS", Placeholder: "cbv_x", Hosts: []string{"maps.googleapis.com", "www.googleapis.com"}, How: "?key={}", Exported: true}},
		{"ODD=p;h.example;X-Odd:%20a%3Bb%25c%20{}", Record{Name: "ODD", Placeholder: "p", Hosts: []string{"h.example"}, How: "X-Odd: a;b%c {}", Exported: true}},
		{"low=p;h;X:%3b{}", Record{Name: "low", Placeholder: "p", Hosts: []string{"h"}, How: "X:;{}", Exported: true}},
		{"my-key=p;h.example;Authorization:%20Basic%20{}", Record{Name: "my-key", Placeholder: "p", Hosts: []string{"h.example"}, How: "Authorization: Basic {}"}},
		{"9LIVES=p;h.example;X:{}", Record{Name: "9LIVES", Placeholder: "p", Hosts: []string{"h.example"}, How: "X:{}"}},
	} {
		got, err := ParseRecord(tc.raw)
		if err != nil {
			t.Errorf("ParseRecord(%q): %v", tc.raw, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRecord(%q)\n got %+v\nwant %+v", tc.raw, got, tc.want)
		}
	}
}

func TestParseRecordRefuses(t *testing.T) {
	for _, tc := range []struct{ raw, rule string }{
		{"NOEQUALS", "no '='"},
		{"=p;;", "NAME must be"},
		{"X$(touch /tmp/canary)=p;;", "NAME must be"},
		{"A.B=p;;", "NAME must be"},
		{"A=;;", "placeholder must be"},
		{"A=p'q;;", "placeholder must be"},
		{"A=p;", "3"},
		{"A=p;;;", "3"},
		{"A=p;h;", "hosts without how"},
		{"A=p;;X:{}", "how without hosts"},
		{"A=p;bad_host;X:{}", "not a host name"},
		{"A=p;-a.b;X:{}", "not a host name"},
		{"A=p;a..b;X:{}", "not a host name"},
		{"A=p;a,,b;X:{}", "not a host name"},
		{"A=p;" + strings.Repeat("a", 64) + ";X:{}", "not a host name"},
		{"A=p;h;X:%41{}", "only %25, %20 and %3B"},
		{"A=p;h;X:{}%2", "must start %25"},
		{"A=p;h;Authorization:%20Bearer", "exactly once"},
		{"A=p;h;X:{}{}", "exactly once"},
		{"A=p;h;{}", "Header: template"},
		{"A=p;h;Bad%20Header:{}", "Header: template"},
		{"A=p;h;?={}", "query key"},
		{"A=p;h;?k=x{}", "query key"},
		{"A=p\nB=q;;", "byte 0x0a"},
		{"A=p\t;;", "byte 0x09"},
		{"A=p\xc3\xa9;;", "byte 0xc3"},
		{"PATH=p;;", "reserved"},
		{"LD_PRELOAD=p;;", "reserved"},
		{"BASH_ENV=p;;", "reserved"},
		// A how reaches the agent's prompt: capped (issue 18, item 4).
		{"A=p;h;X:%20{}" + strings.Repeat("x", MaxHowLen), "longer than"},
		{"my-flag=1;;", "no hosts"},
		{"A=" + strings.Repeat("p", MaxRecordLen) + ";;", "longer than"},
	} {
		_, err := ParseRecord(tc.raw)
		if err == nil {
			t.Errorf("ParseRecord(%q) accepted it", tc.raw)
			continue
		}
		if !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("ParseRecord(%q) = %q, want the rule %q", tc.raw, err, tc.rule)
		}
		if err2 := Validate(Record{}); err2 == nil {
			t.Error("Validate accepted an empty record")
		}
	}
}

func TestRecordsPositionsRepeatsAndWarnings(t *testing.T) {
	rs := &Records{}
	rs.Add(SourceVault, "  A=a;;  bad  my-key=k;h.example;X:{} A=again;; ")
	rs.Add(SourceConnect, "B=b;;  A=c;h.example;X:{}")
	var names []string
	for _, r := range rs.Accepted {
		names = append(names, string(r.Source)+":"+r.Name)
	}
	if want := []string{"COCOONBOX_VAULT:A", "COCOONBOX_VAULT:my-key", "COCOONBOX_CONNECT:B"}; !reflect.DeepEqual(names, want) {
		t.Errorf("accepted %v, want %v", names, want)
	}
	var rejects []string
	for _, r := range rs.Rejected {
		rejects = append(rejects, r.String())
	}
	want := []string{
		"COCOONBOX_VAULT record 2: no '=' after NAME",
		"COCOONBOX_VAULT record 4: NAME A repeats COCOONBOX_VAULT record 1; the first wins",
		"COCOONBOX_CONNECT record 2: NAME A repeats COCOONBOX_VAULT record 1; the first wins",
	}
	if !reflect.DeepEqual(rejects, want) {
		t.Errorf("rejected\n%q\nwant\n%q", rejects, want)
	}
	if len(rs.Warnings) != 1 || rs.Warnings[0].Position != 3 || !strings.Contains(rs.Warnings[0].Rule, "not a shell variable name") {
		t.Errorf("warnings %v", rs.Warnings)
	}
}

func TestRender(t *testing.T) {
	rs := &Records{}
	rs.Add(SourceVault, "GITHUB_TOKEN=ghp_cbv_1;api.github.com,github.com;Authorization:%20Bearer%20{} LINK_NO_REFRESH=1;;")
	rs.Add(SourceConnect, "my-key=k;h.example;?key={}")
	f := Render("r1", "/run/silkd.env", rs.Accepted, []string{"OLD", "LINK_NO_REFRESH", "not-a-name"})
	wantSH := "# cocoonbox vault render r1: generated from /run/silkd.env by /usr/local/lib/cocoonbox/vault; do not edit\n" +
		"export GITHUB_TOKEN='ghp_cbv_1'\nexport LINK_NO_REFRESH='1'\nunset OLD\n"
	if string(f.VaultSH) != wantSH {
		t.Errorf("vault.sh\n%s\nwant\n%s", f.VaultSH, wantSH)
	}
	if want := "GITHUB_TOKEN\nLINK_NO_REFRESH\nOLD\n"; string(f.Names) != want {
		t.Errorf("names %q, want %q", f.Names, want)
	}
	wantKeys := "# cocoonbox vault render r1: NAME\tPLACEHOLDER\tHOSTS\tHOW\n" +
		"GITHUB_TOKEN\tghp_cbv_1\tapi.github.com,github.com\tAuthorization: Bearer {}\n" +
		"my-key\tk\th.example\t?key={}\n"
	if string(f.Keys) != wantKeys {
		t.Errorf("keys\n%s\nwant\n%s", f.Keys, wantKeys)
	}
	// The header names the file read, whatever it is (it always said
	// /run/silkd.env: issue 18, item 6), and a newline cannot end it.
	f = Render("r3", "/tmp/claim\nrm -rf ~", rs.Accepted, nil)
	if first, _, _ := strings.Cut(string(f.VaultSH), "\n"); !strings.Contains(first, `from "/tmp/claim\nrm -rf ~" by`) {
		t.Errorf("vault.sh's header %q does not name the file read, quoted", first)
	}
	if f := Render("r2", "/run/silkd.env", []Record{{Name: "A", Placeholder: "a", Exported: true}}, nil); f.Keys != nil {
		t.Errorf("keys without a record with hosts: %q", f.Keys)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"": "''", "a": "'a'", "it's": `'it'\''s'`, "$(x)": "'$(x)'"} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// vaultLine is every line vault.sh may hold.
var vaultLine = regexp.MustCompile(`^(# cocoonbox vault render [^\n]*|export [A-Za-z_][A-Za-z0-9_]*='[A-Za-z0-9_-]+'|unset [A-Za-z_][A-Za-z0-9_]*)$`)

// FuzzRecords: Records.Add never panics, never accepts a record Validate
// refuses, and renders only lines of the three allowed shapes.
func FuzzRecords(f *testing.F) {
	for _, s := range []string{
		"A=a;; B=b;h.example;Authorization:%20Bearer%20{}",
		"X$(touch /tmp/canary)=p;; A=p'q;;",
		"my-key=k;h;?key={} A=1;; A=2;;",
		"A=p;h;X:%3B%25%20{}",
		"A=p\nB=q;;",
	} {
		f.Add(s, "C=c;;")
	}
	f.Fuzz(func(t *testing.T, vault, connect string) {
		rs := &Records{}
		rs.Add(SourceVault, vault)
		rs.Add(SourceConnect, connect)
		seen := map[string]bool{}
		for _, r := range rs.Accepted {
			if err := Validate(r); err != nil {
				t.Fatalf("accepted %+v, which Validate refuses: %v", r, err)
			}
			if seen[r.Name] {
				t.Fatalf("accepted NAME %q twice", r.Name)
			}
			seen[r.Name] = true
		}
		out := Render("fuzz", "/run/silkd.env", rs.Accepted, nil)
		for _, l := range strings.Split(strings.TrimSuffix(string(out.VaultSH), "\n"), "\n") {
			if !vaultLine.MatchString(l) {
				t.Fatalf("vault.sh line %q", l)
			}
		}
	})
}

// Names a login shell, the C library or a common runtime reads to decide
// what to run are refused; vendors' key names are not (issue 18, item 4:
// LESSOPEN, PS0, JAVA_TOOL_OPTIONS, PYTHONHOME and GIT_* were accepted).
func TestReservedCoversWhatShellsAndRuntimesRead(t *testing.T) {
	for _, name := range []string{"LESSOPEN", "LESSCLOSE", "PS0", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
		"PYTHONHOME", "PYTHONSTARTUP", "PYTHONWARNINGS", "GIT_DIR", "GIT_CONFIG_GLOBAL", "GIT_EXEC_PATH",
		"NODE_OPTIONS", "NODE_EXTRA_CA_CERTS", "npm_config_registry", "PIP_INDEX_URL", "SSH_AUTH_SOCK",
		"SUDO_ASKPASS", "HISTFILE", "GLIBC_TUNABLES", "HOSTALIASES", "MANPAGER", "XAUTHORITY",
		"GOFLAGS", "RUSTC_WRAPPER", "CURL_CA_BUNDLE", "PATH", "LD_PRELOAD", "BASH_ENV"} {
		if _, err := ParseRecord(name + "=p;;"); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("NAME %s: %v; want it refused as reserved", name, err)
		}
	}
	for _, name := range []string{"GITHUB_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NPM_TOKEN",
		"GOOGLE_API_KEY", "CARGO_REGISTRY_TOKEN", "LINK_NO_REFRESH", "HF_TOKEN", "GITLAB_TOKEN"} {
		if _, err := ParseRecord(name + "=p;;"); err != nil {
			t.Errorf("NAME %s refused: %v", name, err)
		}
	}
}
