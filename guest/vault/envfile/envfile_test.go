package envfile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
	}{
		{"plain", "A=1\nB=two words\n", map[string]string{"A": "1", "B": "two words"}},
		{"blanks around", "  A  =   x y  \n", map[string]string{"A": "x y"}},
		{"no final newline", "A=1", map[string]string{"A": "1"}},
		{"empty value", "A=\nB=", map[string]string{"A": "", "B": ""}},
		{"crlf", "A=1\r\nB=2\r\n", map[string]string{"A": "1", "B": "2"}},
		{"comments", "# A=1\n; B=2\n  # C=3\nD=4 # not a comment\n", map[string]string{"D": "4 # not a comment"}},
		{"comment continues over backslash-newline (252)", "# c \\\nA=1\nB=2\n", map[string]string{"B": "2"}},
		{"single quotes", "A='a \"b\" $c \\d'\n", map[string]string{"A": `a "b" $c \d`}},
		{"single quotes keep newlines", "A='x\ny'\n", map[string]string{"A": "x\ny"}},
		{"double quotes", `A="a \"b\" \$c \\ \x \` + "`" + `"` + "\n", map[string]string{"A": "a \"b\" $c \\ \\x `"}},
		{"double quote continuation", "A=\"x\\\ny\"\n", map[string]string{"A": "xy"}},
		{"double quotes keep newlines", "A=\"x\ny\"\n", map[string]string{"A": "x\ny"}},
		{"quotes concatenate, blanks between dropped", `A="a" 'b'  c` + "\n", map[string]string{"A": "abc"}},
		{"quote inside bare text is a byte", `A=a "b c"` + "\n", map[string]string{"A": `a "b c"`}},
		{"bare escapes", `A=a\ b\\c\$d` + "\n", map[string]string{"A": `a b\c$d`}},
		{"bare continuation", "A=one \\\ntwo\n", map[string]string{"A": "one two"}},
		{"escaped trailing blank kept", "A=x\\ \n", map[string]string{"A": "x "}},
		{"unterminated quote at end", "A='abc", map[string]string{"A": "abc"}},
		{"unterminated quote eats the rest", "A='abc\nB=2\n", map[string]string{"A": "abc\nB=2\n"}},
		{"line without =", "JUNK\nA=1\n", map[string]string{"A": "1"}},
		{"later wins", "A=1\nA=2\n", map[string]string{"A": "2"}},
		{"invalid names dropped", "1A=x\nA-B=y\nA B=z\nOK=1\n", map[string]string{"OK": "1"}},
		{"nothing is evaluated", "A=$(touch /tmp/x) `id` ${HOME}\n", map[string]string{"A": "$(touch /tmp/x) `id` ${HOME}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range f.Entries {
				got[e.Name] = e.Value
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{"A=\xff\n", "\xfe=1\n", "A=1\nB=x\x00y\n"} {
		_, err := Parse([]byte(in))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", in, err)
		}
	}
	_, err := Parse([]byte("A=1\nB=\x00\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: a NUL byte") {
		t.Errorf("NUL on line 2: %v", err)
	}
}

func TestLinesAndDropped(t *testing.T) {
	f, err := Parse([]byte("# c\nA=1\nbad-name=2\n\nB='x\ny'\nC=3\n"))
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, e := range f.Entries {
		lines[e.Name] = e.Line
	}
	if want := map[string]int{"A": 2, "B": 5, "C": 7}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %v, want %v", lines, want)
	}
	if len(f.Dropped) != 1 || f.Dropped[0].Name != "bad-name" {
		t.Errorf("dropped %v", f.Dropped)
	}
	if v, ok := f.Lookup("C"); !ok || v != "3" {
		t.Errorf("Lookup(C) = %q %v", v, ok)
	}
	if _, ok := f.Lookup("Z"); ok {
		t.Error("Lookup(Z) found a value")
	}
}

// TestQuoteRoundTrip writes a file with Quote to disk and reads it back.
func TestQuoteRoundTrip(t *testing.T) {
	values := []string{"", "plain", "sp ace", "q'uo\"te", "$(x) `y` \\z", "new\nline", "tab\tcr\r", "A=1;a.b;c%20d e"}
	var b strings.Builder
	for i, v := range values {
		b.WriteString("V" + string(rune('A'+i)) + "=" + Quote(v) + "\n")
	}
	path := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		if got, _ := f.Lookup("V" + string(rune('A'+i))); got != v {
			t.Errorf("round trip of %q gave %q", v, got)
		}
	}
}

// FuzzParse: Parse never panics; what it accepts has valid names and
// UTF-8 values; Quote round-trips any valid value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"A=1\n", "A='x\ny'\n", `A="a\"b"`, "# c\\\nA=1", "A=x\\\ny", "A=\xff", "K=\"", "A=a 'b'"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range file.Entries {
			if !ValidName(e.Name) || !utf8.ValidString(e.Value) || strings.IndexByte(e.Value, 0) >= 0 {
				t.Fatalf("accepted %q=%q", e.Name, e.Value)
			}
			if seen[e.Name] {
				t.Fatalf("name %q twice", e.Name)
			}
			seen[e.Name] = true
		}
		if utf8.Valid(data) && !strings.ContainsRune(string(data), 0) {
			v := string(data)
			back, err := Parse([]byte("X=" + Quote(v)))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := back.Lookup("X"); got != v {
				t.Fatalf("Quote(%q) read back as %q", v, got)
			}
		}
	})
}
