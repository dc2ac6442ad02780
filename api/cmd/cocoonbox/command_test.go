package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/command/commandtest"
)

// Issue 45, Deliver 1: every command has its own help naming its own
// flags, and its usage error is the fault and one line pointing at its
// --help (testdata/, go test -update rewrites them).
func TestEveryCommandsHelpAndUsageError(t *testing.T) {
	commandtest.Golden(t, newRoot)
}

func TestBashLoadsTheCompletion(t *testing.T) {
	commandtest.BashCompletion(t, "cocoonbox", []string{os.Args[0]}, []string{asCLI + "=1"})
}

// Ctrl-C while box create waits for a dead api to come back ends the CLI
// with 130.
func TestSIGINTExits130(t *testing.T) {
	cmd := exec.Command(os.Args[0], "box", "create", "demo", "--endpoint", closedEndpoint(t))
	cmd.Env = append(os.Environ(), asCLI+"=1", "COCOONBOX_TOKEN=cb_"+strings.Repeat("0", 64))
	commandtest.Interrupted(t, cmd, "trying again")
}
