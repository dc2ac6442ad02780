package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

const testUsage = "usage: demo [--watch] [--dir DIR]\n\nexit codes: 0 done; 2 usage\n"

func parse(args ...string) (rest []string, code int, exit bool, watch bool, stdout, stderr string) {
	var out, errb bytes.Buffer
	c := Command{Name: "demo", Usage: testUsage, Stdout: &out, Stderr: &errb}
	fs := flag.NewFlagSet("x", flag.ExitOnError) // Parse must override ExitOnError
	w := fs.Bool("watch", false, "")
	fs.String("dir", "/run/x", "")
	rest, code, exit = c.Parse(fs, args)
	return rest, code, exit, *w, out.String(), errb.String()
}

func TestHelpExits0WithTheUsageOnStdout(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help", "help"} {
		_, code, exit, _, out, errs := parse(arg)
		if !exit || code != OK || out != testUsage || errs != "" {
			t.Errorf("%s: exit=%v code %d stdout %q stderr %q; want exit 0 with the usage on stdout only", arg, exit, code, out, errs)
		}
	}
}

func TestVersionPrintsNameAndVersion(t *testing.T) {
	_, code, exit, _, out, _ := parse("--version")
	if !exit || code != OK || out != version.String("demo")+"\n" {
		t.Errorf("--version: exit=%v code %d stdout %q", exit, code, out)
	}
}

func TestUsageErrorExits2WithTheFaultAndThePointerOnStderr(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--dir"}, {"--watch=maybe"}} {
		_, code, exit, _, out, errs := parse(args...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if !exit || code != Usage || out != "" || !strings.HasPrefix(errs, "demo: ") || len(lines) != 2 || lines[1] != "run 'demo --help' for usage" {
			t.Errorf("%q: exit=%v code %d stdout %q stderr %q; want 2, the fault then the pointer at --help on stderr", args, exit, code, out, errs)
		}
	}
}

func TestParseReturnsTheArgumentsAfterTheFlags(t *testing.T) {
	rest, code, exit, watch, _, _ := parse("--watch", "write", "--x")
	if exit || code != OK || !watch || strings.Join(rest, " ") != "write --x" {
		t.Errorf("got rest %q code %d exit %v watch %v", rest, code, exit, watch)
	}
}

func TestNilFlagSetStillKnowsHelpAndVersion(t *testing.T) {
	var out bytes.Buffer
	c := Command{Name: "demo", Usage: testUsage, Stdout: &out}
	if _, code, exit := c.Parse(nil, []string{"--help"}); !exit || code != OK || out.String() != testUsage {
		t.Errorf("nil flag set --help: exit=%v code %d out %q", exit, code, out.String())
	}
	if rest, _, exit := c.Parse(nil, []string{"show", "--hostname"}); exit || len(rest) != 2 {
		t.Errorf("nil flag set: rest %q exit %v", rest, exit)
	}
}

// The numbers are a published interface (docs/conventions.md's table, the units'
// RestartPreventExitStatus=): they never change.
func TestExitCodesAreTheDocumentedNumbers(t *testing.T) {
	got := []int{OK, Failed, Usage, Invalid, NoInput, Unavailable, Unsafe, IO, TryLater}
	want := []int{0, 1, 2, 65, 66, 69, 73, 74, 75}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("exit code %d is %d; docs/conventions.md's table says %d", i, got[i], want[i])
		}
	}
}

// docs/conventions.md's one exit-code table names every code, so an admin and the
// api read the same meanings the code has.
func TestConventionsTableListsEveryExitCode(t *testing.T) {
	data, err := os.ReadFile("../../docs/conventions.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n## Exit codes\n")
	if !ok {
		t.Fatal(`docs/conventions.md has no "## Exit codes" section`)
	}
	table, _, _ = strings.Cut(table, "\n#")
	for name, code := range map[string]int{"OK": OK, "Failed": Failed, "Usage": Usage, "Invalid": Invalid,
		"NoInput": NoInput, "Unavailable": Unavailable, "Unsafe": Unsafe, "IO": IO, "TryLater": TryLater} {
		if row := fmt.Sprintf("| %d | `%s` |", code, name); !strings.Contains(table, row) {
			t.Errorf("docs/conventions.md's exit-code table lacks the row %q", row)
		}
	}
}
