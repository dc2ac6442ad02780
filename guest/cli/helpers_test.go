// This file holds the test that every helper under guest/cmd follows the
// one command-line convention of this package (issue 18, item 6).
package cli_test

import (
	"github.com/cocoonbox/cocoonbox/internal/version"

	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/cli"
)

// helpers lists the commands under guest/cmd: every directory with a
// main.go. A new helper is held to the convention without being listed.
func helpers(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("../cmd/*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no helpers found under guest/cmd (%v)", err)
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = filepath.Base(filepath.Dir(d))
	}
	return names
}

type result struct {
	code           int
	stdout, stderr string
}

func runHelper(t *testing.T, bin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	c := exec.Command(bin, args...)
	c.Stdin, c.Stdout, c.Stderr = nil, &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %q: %v", bin, args, err)
	}
	return result{c.ProcessState.ExitCode(), out.String(), errb.String()}
}

// Contract (DESIGN, Conventions): exit codes mean something and are the
// same everywhere. Each helper: --help prints its usage on stdout and
// exits 0; --version prints "NAME RELEASE (REVISION)" and exits 0; an unknown option
// exits 2 with the fault and "run 'NAME --help' for usage" on stderr,
// nothing on stdout (guest/cli's form and internal/command's, which
// branchbox is built on, are one). (On
// main before, identity and hostname exited 64; vault and session-save
// printed --help on stderr.)
func TestEveryHelperFollowsTheCommandLineConvention(t *testing.T) {
	names := helpers(t)
	bin := t.TempDir()
	args := []string{"build", "-o", bin + "/"}
	for _, n := range names {
		args = append(args, "../cmd/"+n)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, n := range names {
		exe := filepath.Join(bin, n)
		if _, err := os.Stat(exe); err != nil {
			t.Fatalf("helper %s: %v", n, err)
		}
		t.Run(n, func(t *testing.T) {
			if r := runHelper(t, exe, "--help"); r.code != cli.OK || !strings.Contains(strings.ToLower(r.stdout), "usage:") ||
				!strings.Contains(r.stdout, n+" ") || r.stderr != "" {
				t.Errorf("--help: exit %d, stdout %.60q, stderr %.60q; want 0 and the usage of %s on stdout only", r.code, r.stdout, r.stderr, n)
			}
			if r := runHelper(t, exe, "--version"); r.code != cli.OK || r.stdout != version.String(n)+"\n" {
				t.Errorf("--version: exit %d, stdout %q; want 0 and %q", r.code, r.stdout, version.String(n))
			}
			r := runHelper(t, exe, "--no-such-option")
			pointer := "\nrun '" + n + " --help' for usage\n"
			if r.code != cli.Usage || r.stdout != "" || !strings.HasPrefix(r.stderr, n+": ") || !strings.HasSuffix(r.stderr, pointer) ||
				strings.Count(r.stderr, "\n") != 2 {
				t.Errorf("--no-such-option: exit %d, stdout %.60q, stderr %.80q; want 2, the fault and %q on stderr", r.code, r.stdout, r.stderr, pointer)
			}
		})
	}
}
