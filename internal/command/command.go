// Package command holds the command-line conventions every cocoonbox
// binary shares on top of spf13/cobra (docs/conventions.md, Command
// lines): each command's own help, a usage error printed as the fault and
// one line pointing at the command's --help (exit 2), "did you mean" for
// an unknown command, `completion bash|zsh|fish`, `--version` and
// `version` printing internal/version's form, exit 130 on Ctrl-C, and man
// pages generated from the same tree.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// Exit codes every binary keeps (docs/conventions.md, Exit codes).
const (
	// Failed is a failure no other code names.
	Failed = 1
	// Usage is a bad command line.
	Usage = 2
	// Interrupted is 128 + SIGINT: the user pressed Ctrl-C.
	Interrupted = 130
)

// CleanStop is the annotation (cobra.Command.Annotations) of a command
// that a signal stops as it is meant to stop (a server under systemd):
// its value names those signals ("SIGTERM"), and when one of them ended
// the command and it returned no error the binary exits 0, not 128 + the
// signal. Ctrl-C (SIGINT) not named stays 130.
const CleanStop = "cocoonbox.clean-stop"

// UsageError is a bad command line. Execute prints Msg and a line
// pointing at the failing command's --help, and exits 2.
type UsageError struct {
	Msg string
	// Path is the command whose --help the pointer names ("cocoonbox box
	// create"); Run fills it with the command that failed when empty.
	Path string
	// Err, when set, is the error Msg says (errors.Is reaches it).
	Err error
}

func (e UsageError) Error() string { return e.Msg }

// Unwrap is Err.
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError of the formatted message.
func Usagef(format string, a ...any) error { return UsageError{Msg: fmt.Sprintf(format, a...)} }

// Exit ends the binary with this status, the command having said why
// already (a remote command's status, an answer already printed).
type Exit int

func (e Exit) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// Coded is an error with an exit status of its own; Execute prints its
// message and exits with ExitCode.
type Coded interface {
	error
	ExitCode() int
}

// extra are the commands a build tag adds to every root (man.go).
var extra []func(root *cobra.Command) *cobra.Command

// New sets root up as a binary's root command: its version, its
// `version` subcommand, cobra's completion command, the usage-error
// convention on every command of the tree and, built with -tags
// manpages, the hidden `man DIR` that writes the man pages. Call it once
// the tree is complete.
func New(root *cobra.Command) *cobra.Command {
	name := root.Name()
	root.Version = version.String(name)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SetFlagErrorFunc(FlagError)
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print " + name + "'s release and source revision",
		Long:  "Print \"" + name + " RELEASE (REVISION)\", the form of every cocoonbox binary (internal/version).",
		Args:  NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String(name))
			return err
		},
	})
	for _, add := range extra {
		root.AddCommand(add(root))
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root)
	return root
}

// walk gives every command of the tree the conventions: a group (a
// command with subcommands and no action of its own) answers a missing
// or unknown subcommand with a usage error and suggestions, and argument
// checks fail as usage errors.
func walk(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2
	switch {
	case c.HasSubCommands() && c.Run == nil && c.RunE == nil:
		c.Args = cobra.ArbitraryArgs
		c.RunE = group
	case c.HasSubCommands():
		// A group with an action of its own (`devices` lists): an
		// argument is a subcommand it does not know.
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return Unknown(cmd, args[0])
			}
			return nil
		}
	case c.Args != nil:
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				var ue UsageError
				if errors.As(err, &ue) {
					return err
				}
				return UsageError{Msg: err.Error()}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		walk(sub)
	}
}

// group is a group's action: no subcommand or an unknown one.
func group(cmd *cobra.Command, args []string) error {
	if len(args) == 0 && !cmd.HasParent() {
		return Usagef("no command given: %s", strings.Join(Names(cmd), ", "))
	}
	if len(args) == 0 {
		return Usagef("%s needs a subcommand: %s", sub(cmd), strings.Join(Names(cmd), ", "))
	}
	return Unknown(cmd, args[0])
}

// Unknown is the usage error for arg, no subcommand of cmd, with cobra's
// suggestions ("did you mean").
func Unknown(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q", arg, cmd.CommandPath())
	if cmd.HasParent() {
		msg = fmt.Sprintf("unknown %s subcommand %q", sub(cmd), arg)
	}
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		msg += " (want " + strings.Join(Names(cmd), ", ") + ")"
	}
	return UsageError{Msg: msg}
}

// sub is cmd's path without the binary's name ("box create"), the
// binary's name for the root.
func sub(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	_, p, _ := strings.Cut(cmd.CommandPath(), " ")
	return p
}

// Names are cmd's visible subcommands, in cobra's order.
func Names(cmd *cobra.Command) []string {
	var n []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" && c.Name() != "version" {
			n = append(n, c.Name())
		}
	}
	return n
}

// FlagError makes pflag's error a usage error, and says what a Go-style
// single-dash long flag (-json) meant: pflag reads it as shorthands. A
// command with a flag error func of its own calls it for the rest.
func FlagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	for _, a := range os.Args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && cmd.Flags().Lookup(name) != nil &&
			strings.Contains(msg, "in "+a) {
			msg = fmt.Sprintf("%s: long flags take two dashes: --%s", a, strings.TrimPrefix(a, "-"))
		}
	}
	return UsageError{Msg: msg}
}

// NoArgs refuses any argument, naming the first.
func NoArgs(cmd *cobra.Command, args []string) error { return MaxArgs(0)(cmd, args) }

// MaxArgs refuses more than n arguments, naming the first extra one.
func MaxArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return Usagef("%s: unexpected argument %q", sub(cmd), args[n])
		}
		return nil
	}
}

// Run runs root with args, stdin and stdout (cobra's help and usage go
// to stdout, as --help's do), ctx cancelled as the caller says. It
// returns the command's error unprinted, a UsageError with its Path
// filled in.
func Run(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	_, err := run(ctx, root, args, stdin, stdout, stderr)
	return err
}

// run is Run, naming the command that ran (the root when none was found).
func run(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, error) {
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if cmd == nil {
		cmd = root
	}
	var ue UsageError
	if errors.As(err, &ue) && ue.Path == "" {
		ue.Path = cmd.CommandPath()
		return cmd, ue
	}
	return cmd, err
}

// Report prints err on stderr in the convention's form and returns the
// exit status: 0 for nil, an Exit's own, a Coded's, 2 for a UsageError
// (the fault, then "run 'PATH --help' for usage"), 1 otherwise.
func Report(stderr io.Writer, name string, err error) int {
	var ex Exit
	var ue UsageError
	var coded Coded
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ex):
		return int(ex)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s\nrun '%s --help' for usage\n", name, ue.Msg, ue.Path)
		return Usage
	case errors.As(err, &coded):
		fmt.Fprintf(stderr, "%s: %s\n", name, err)
		return coded.ExitCode()
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return Failed
}

// Execute runs root on os.Args, the command's context cancelled by
// SIGINT or SIGTERM, and returns the binary's exit status: Report's, or
// 128 + the signal's number when a signal ended the command (0 for a
// CleanStop command that then returned no error).
func Execute(root *cobra.Command) int {
	ctx, sig, stop := Signals()
	defer stop()
	cmd, err := run(ctx, root, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if s := sig(); s != 0 && (err != nil || !slices.Contains(strings.Fields(cmd.Annotations[CleanStop]), signalName(s))) {
		if err != nil && !errors.Is(err, context.Canceled) {
			Report(os.Stderr, root.Name(), err)
		}
		return 128 + int(s)
	}
	return Report(os.Stderr, root.Name(), err)
}

// Signals is a context SIGINT and SIGTERM cancel, a func naming the
// signal that did (0 before one came), and stop, which releases them.
func Signals() (context.Context, func() syscall.Signal, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			// A second Ctrl-C kills at once, as if nothing caught it: a
			// command blocked in a read of its terminal (a password
			// prompt) does not see its context end.
			signal.Stop(ch)
			cancel(signalled{s.(syscall.Signal)})
		case <-done:
		}
	}()
	got := func() syscall.Signal {
		var s signalled
		if errors.As(context.Cause(ctx), &s) {
			return s.sig
		}
		return 0
	}
	return ctx, got, func() { signal.Stop(ch); close(done); cancel(nil) }
}

// signalName is s as CleanStop names it: SIGTERM, SIGINT.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return s.String()
}

// signalled is the cause of a context a signal cancelled.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return "interrupted by " + s.sig.String() }

// Flags is pflag's flag set, named here so a binary's helpers that take
// one need not import pflag.
type Flags = pflag.FlagSet

// Flag is pflag's flag, as Flags is its flag set.
type Flag = pflag.Flag
