package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The child run of TestSkipOrFail: it calls SkipOrFail and nothing else.
func TestChildCannotRun(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") != "1" {
		t.Skip("run by TestSkipOrFailFailsUnderMakeTest")
	}
	SkipOrFail(t, "cannot run here")
}

// Under make test (NoSkipEnv=1) a test that cannot run fails; by hand it
// skips (issue 18, item 9: a run that was not root skipped every box test
// and stayed green).
func TestSkipOrFailFailsUnderMakeTest(t *testing.T) {
	for _, c := range []struct {
		noSkip string
		fails  bool
	}{{"1", true}, {"", false}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildCannotRun$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", NoSkipEnv+"="+c.noSkip)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != c.fails || !strings.Contains(string(out), "cannot run here") {
			t.Errorf("%s=%q: failed=%v, want %v:\n%s", NoSkipEnv, c.noSkip, failed, c.fails, out)
		}
	}
}
