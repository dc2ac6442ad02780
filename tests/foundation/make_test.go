//go:build booted

package foundation

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Each of the README's two commands sets the machine up itself: on a fresh
// machine `make test` alone failed for want of a package, since only
// `make demo` and .ci/run ran `make setup` (issue 18, item 13). make's
// dry run of each must start with the set-up.
func TestMakeTestAndMakeDemoRunSetupFirst(t *testing.T) {
	root, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"test", "demo"} {
		out, err := exec.Command("make", "-C", root, "--no-print-directory", "-n", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		if first, _, _ := strings.Cut(string(out), "\n"); first != "tests/setup-host" {
			t.Errorf("make %s starts with %q, not the set-up (tests/setup-host)", target, first)
		}
	}
}

// CI failed once on FuzzParseSession with a bare "context deadline exceeded"
// and no input: a duration -fuzztime races Go's fuzz coordinator
// (golang/go#75804). make's fuzz budget must be a count, and tests/fuzz
// refuses a duration before it runs anything.
func TestFuzzBudgetIsACountNotADuration(t *testing.T) {
	root, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "-C", root, "--no-print-directory", "-n", "fuzz").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n fuzz: %v\n%s", err, out)
	}
	fields := strings.Fields(strings.TrimSpace(string(out)))
	if budget := fields[len(fields)-1]; !strings.HasSuffix(budget, "x") {
		t.Errorf("make fuzz gives tests/fuzz the budget %q, not an execution count\n%s", budget, out)
	}
	cmd := exec.Command(root+"/tests/fuzz", "4s")
	out, err = cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("tests/fuzz 4s: %v, want exit 2\n%s", err, out)
	}
	if s := string(out); !strings.Contains(s, `FUZZTIME "4s" is not an execution count`) || strings.Contains(s, "fuzz: github.com") {
		t.Errorf("tests/fuzz 4s did not refuse before fuzzing:\n%s", s)
	}
}
