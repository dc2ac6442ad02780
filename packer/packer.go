// Package packer is the host side of an offload (Contract: Offload,
// "Offload, Mac side" and "Back, Mac side"), run on the user's Linux
// machine: the hand-over check, the host half of the preflight, the three
// Execs into the box (begin, rsync, send with the stream), and back's
// fetch and merge against S. The box side is cocoonbox-agent offload
// (guest/offload); the command line is `cocoonbox offload` and
// `cocoonbox back` (api/cmd/cocoonbox).
package packer

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Transport is the packer's one way into a box: a command run there as
// user. The product's is RSH (`cocoonbox rsh`); a test may enter a booted
// box another way.
type Transport interface {
	// Command is a host command that runs argv in the box as user, with a
	// login shell's environment; its stdin, stdout, stderr and exit status
	// are the box command's.
	Command(ctx context.Context, argv ...string) *exec.Cmd
	// Shell is the remote-shell command line that rsync's -e and git's
	// GIT_SSH_COMMAND (GIT_SSH_VARIANT=simple) take: run as
	// `SHELL HOST WORDS...`, it runs the words, joined with spaces as ssh
	// joins them, through the user's shell in the box.
	Shell() string
}

// RSH reaches a box through `cocoonbox rsh --box B` (Contract: Remote
// command, Session.Exec).
type RSH struct {
	// Program is the cocoonbox binary (os.Executable of the CLI).
	Program string
	// Box is the box's name or id, as --box takes it.
	Box string
}

// Command is `cocoonbox rsh --box B -- argv...`, each word quoted: the
// api joins the words with spaces into one line for the login shell, as
// ssh does.
func (r RSH) Command(ctx context.Context, argv ...string) *exec.Cmd {
	args := []string{"rsh", "--box", r.Box, "--"}
	for _, a := range argv {
		args = append(args, ShellQuote(a))
	}
	return exec.CommandContext(ctx, r.Program, args...)
}

// Shell is `cocoonbox rsh --box B`, quoted for the shell rsync and git
// run it with.
func (r RSH) Shell() string { return ShellQuote(r.Program) + " rsh --box " + ShellQuote(r.Box) }

// ShellQuote quotes s as one word for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Refusal is an outcome where nothing changed: a block, a hand-over or a
// name outside its rule, a warning the user did not say yes to (exit 3).
type Refusal struct {
	Msg string
	// Findings are the preflight's, when the refusal is a block or an
	// unconfirmed warning.
	Findings []Finding
}

func (r *Refusal) Error() string { return r.Msg }

// Failure is a step that failed after something changed; Left says what
// was rolled back and what is left where (exit 1).
type Failure struct {
	Step string
	Err  error
	Left string
}

func (f *Failure) Error() string {
	s := f.Step + ": " + f.Err.Error()
	if f.Left != "" {
		s += "; " + f.Left
	}
	return s
}

func (f *Failure) Unwrap() error { return f.Err }

// Progress writes lines for a person (stderr); a nil writer drops them.
type Progress struct{ W io.Writer }

// Printf writes one line.
func (p Progress) Printf(format string, a ...any) {
	if p.W != nil {
		fmt.Fprintf(p.W, "cocoonbox: "+format+"\n", a...)
	}
}
