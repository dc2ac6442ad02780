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
