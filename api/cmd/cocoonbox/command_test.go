package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

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
	commandtest.Interrupted(t, cmd, commandtest.Says("trying again"))
}

// Ctrl-C at keys add's prompt for the value (a terminal, its echo off)
// ends the CLI with 130 at once and gives the terminal its echo back:
// the prompt's read is one no context stops (command.Read).
func TestSIGINTAtAPromptExits130AndGivesTheEchoBack(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	cmd := exec.Command(os.Args[0], "keys", "add", "K", "--host", "api.example.com", "--endpoint", closedEndpoint(t))
	cmd.Env = append(os.Environ(), asCLI+"=1", "COCOONBOX_TOKEN=cb_"+strings.Repeat("0", 64))
	cmd.Stdin = tty
	echo := func() bool {
		st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		return err == nil && st.Lflag&unix.ECHO != 0
	}
	commandtest.Interrupted(t, cmd, func(stderr string) bool { return strings.Contains(stderr, "not shown") && !echo() })
	if !echo() {
		t.Fatal("the terminal's echo is still off after Ctrl-C at the prompt")
	}
}
