package main

import (
	"bytes"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// Issue 45: `branchbox version` was an unknown command; both forms print
// the one convention, NAME RELEASE (REVISION) (internal/version).
func TestVersionPrintsNameReleaseRevision(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{arg}, &stdout, &stderr)
		if want := version.String("branchbox") + "\n"; code != 0 || stdout.String() != want {
			t.Errorf("branchbox %s: exit %d, stdout %q, stderr %q, want %q", arg, code, stdout.String(), stderr.String(), want)
		}
	}
}
