package main

import (
	"os/exec"
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
	commandtest.BashCompletion(t, "cocoonbox-api", []string{bin}, nil)
}

// Ctrl-C to serve stops it, exit 130 (SIGTERM, systemd's stop, exits 0:
// served.stop).
func TestSIGINTExits130(t *testing.T) {
	cmd := exec.Command(bin, "serve", "--state-dir", stateDir(t), "--listen", freeAddr(t))
	commandtest.Interrupted(t, cmd, commandtest.Says("msg=serving"))
}
