package main

import (
	"os"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/command/commandtest"
)

// Issue 45, Deliver 1: every verb has its own help naming its own flags,
// and its usage error is the fault and one line pointing at its --help
// (testdata/, go test -update rewrites them).
func TestEveryCommandsHelpAndUsageError(t *testing.T) {
	commandtest.Golden(t, func() *cobra.Command {
		return newRoot(func(*options) int { t.Fatal("a verb ran"); return 0 })
	})
}

func TestBashLoadsTheCompletion(t *testing.T) {
	commandtest.BashCompletion(t, "branchbox", []string{os.Args[0]}, []string{"BRANCHBOX_TEST_AS_MAIN=1"})
}
