package main

import (
	"os"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command/commandtest"
)

// asDaemon set in a test binary's environment makes it cocoonbox-sandboxd
// (main with the arguments after the binary's name), so a test runs the
// binary without building it.
const asDaemon = "COCOONBOX_TEST_AS_SANDBOXD"

func TestMain(m *testing.M) {
	if os.Getenv(asDaemon) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Issue 45, Deliver 1: every command has its own help naming its own
// flags, and its usage error is the fault and one line pointing at its
// --help (testdata/, go test -update rewrites them).
func TestEveryCommandsHelpAndUsageError(t *testing.T) {
	commandtest.Golden(t, newRoot)
}

func TestBashLoadsTheCompletion(t *testing.T) {
	commandtest.BashCompletion(t, "cocoonbox-sandboxd", []string{os.Args[0]}, []string{asDaemon + "=1"})
}
