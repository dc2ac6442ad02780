package packages

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseAcceptsDebianNamesWithOptionalArch(t *testing.T) {
	in := "hello\ncowsay\nlibc6:i386\ng++-12\nlibstdc++6:amd64\n  sl\t\r\n0ad\npython3.11\nhello\nfoo:kfreebsd-amd64\n"
	list, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hello", "cowsay", "libc6:i386", "g++-12", "libstdc++6:amd64", "sl", "0ad", "python3.11", "foo:kfreebsd-amd64"}
	if strings.Join(list.Names, ",") != strings.Join(want, ",") {
		t.Errorf("names = %q, want %q", list.Names, want)
	}
	if len(list.Refused) != 0 {
		t.Errorf("refused %v", list.Refused)
	}
}

func TestParseRefusesHostileLinesNamingTheLine(t *testing.T) {
	long := strings.Repeat("a", 10<<10)
	lines := []string{
		"hello",                  // 1 ok
		"-oAPT::Get::Foo=1",      // 2 option
		"foo; rm -rf /",          // 3 shell
		"",                       // 4 empty
		long,                     // 5 10 KiB
		"cowsay",                 // 6 ok
		"Hello",                  // 7 upper case
		"a",                      // 8 too short
		"foo:",                   // 9 empty arch
		"foo:AMD64",              // 10
		"foo bar",                // 11
		"--purge",                // 12
		"foo\x00bar",             // 13
		"+foo",                   // 14
		"foo/bookworm-backports", // 15 a release selector: not a name
		"foo=1.0",                // 16 a version: not a name
		"sl",                     // 17 ok
	}
	list, err := Parse(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(list.Names, ","); got != "hello,cowsay,sl" {
		t.Errorf("names = %q, want hello,cowsay,sl", got)
	}
	var refusedLines []int
	for _, r := range list.Refused {
		refusedLines = append(refusedLines, r.Line)
		if !strings.HasPrefix(r.Error(), "line ") || len(r.Text) > 80 {
			t.Errorf("refusal message %q is not one short line naming the line", r.Error())
		}
	}
	want := []int{2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if len(refusedLines) != len(want) {
		t.Fatalf("refused lines %v, want %v (%v)", refusedLines, want, list.Refused)
	}
	for i := range want {
		if refusedLines[i] != want[i] {
			t.Fatalf("refused lines %v, want %v", refusedLines, want)
		}
	}
	if r := list.Refused[0]; !strings.Contains(r.Reason, "option") {
		t.Errorf("line 2's reason %q does not say it looks like an option", r.Reason)
	}
	if r := list.Refused[3]; !strings.Contains(r.Reason, "longer than") {
		t.Errorf("the 10 KiB line's reason is %q", r.Reason)
	}
}

func TestParseLastLineWithoutNewlineAndCRLF(t *testing.T) {
	list, err := Parse(strings.NewReader("hello\r\nsl"))
	if err != nil || strings.Join(list.Names, ",") != "hello,sl" || len(list.Refused) != 0 {
		t.Fatalf("got %v %v %v", list.Names, list.Refused, err)
	}
}

func TestParseLongLineAtTheEnd(t *testing.T) {
	list, err := Parse(strings.NewReader("hello\n" + strings.Repeat("x", MaxLineLen+1)))
	if err != nil || len(list.Names) != 1 || len(list.Refused) != 1 || list.Refused[0].Line != 2 {
		t.Fatalf("got %v %v %v", list.Names, list.Refused, err)
	}
	// Exactly MaxLineLen is still read as a line (and is a valid name here).
	list, _ = Parse(strings.NewReader(strings.Repeat("x", MaxLineLen) + "\n"))
	if len(list.Names) != 1 {
		t.Fatalf("a %d-byte name was refused: %v", MaxLineLen, list.Refused)
	}
}

func TestParseRefusesAListLargerThanMaxListSize(t *testing.T) {
	_, err := Parse(strings.NewReader(strings.Repeat("hello\n", MaxListSize/6+1)))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestParseReportsReadErrors(t *testing.T) {
	if _, err := Parse(iotest.ErrReader(errors.New("boom"))); err == nil {
		t.Fatal("a failing reader gave no error")
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"hello", "libc6:i386", "g++", "0ad"} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", " hello", "-o", "x", "a;b", "Foo", "hello:", strings.Repeat("a", MaxLineLen+1)} {
		if err := ValidName(bad); err == nil {
			t.Errorf("ValidName(%q) accepted it", bad)
		}
	}
}

// policyName is Debian policy's grammar of a package name (5.6.7: at
// least two of a-z, 0-9, '+', '-' and '.', starting with a letter or
// digit) with Parse's optional ":arch", written apart from Parse's own
// check() so the fuzz target compares the code with the rule, not with
// itself.
var policyName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9][a-z0-9-]*)?$`)

func policyValid(s string) bool { return len(s) <= MaxLineLen && policyName.MatchString(s) }

// FuzzParse: Parse never panics, accepts only names of Debian policy's
// grammar (policyValid), and accepts a single line exactly when the policy
// accepts it trimmed of spaces, tabs and CRs.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"hello\n", "-oAPT::Get::Foo=1\n", "foo; rm -rf /\n", "\n", "libc6:i386\n", "a:b:c\n", "g++\r\n", strings.Repeat("a", 300),
		// Each rule's edge, both sides.
		"a", "ab", "0a", "Ab", "aB", ".a", "+a", "a.", "a+-.", "a_b", "a/b", "a\x00b", "\u00e9a", "ab:", "ab:i386", "ab:all", "ab:-x", "ab:Amd64", "ab:x_y", "ab:x.y", "ab:c:d",
		" \tab\r", strings.Repeat("a", MaxLineLen), strings.Repeat("a", MaxLineLen+1), "ab:" + strings.Repeat("a", MaxLineLen-3)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		list, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, n := range list.Names {
			if !policyValid(n) {
				t.Fatalf("Parse accepted %q, which is no Debian package name", n)
			}
			if err := ValidName(n); err != nil {
				t.Fatalf("Parse accepted %q, which ValidName refuses: %v", n, err)
			}
		}
		if !strings.Contains(in, "\n") {
			trimmed := strings.Trim(in, " \t\r")
			accepted := len(list.Names) == 1
			valid := len(in) <= MaxLineLen && policyValid(trimmed)
			if accepted != valid {
				t.Fatalf("line %q: Parse accepted it: %v; Debian policy's grammar: %v", in, accepted, valid)
			}
			if (ValidName(in) == nil) != (in == trimmed && valid) {
				t.Fatalf("ValidName(%q) = %v; Debian policy's grammar: %v", in, ValidName(in), valid)
			}
		}
	})
}
