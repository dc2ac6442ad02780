// Package cli is the command-line convention every cocoonbox helper
// follows, so that the api, sandboxd, systemd units and an admin at a
// terminal read every helper the same way (DESIGN: "Exit codes mean
// something and are documented"; docs/conventions.md: "Exit codes"):
//
//   - a usage error exits 2 (Usage) with one line naming the fault and one
//     pointing at --help on stderr (the form of every cocoonbox binary,
//     internal/command's: the fault is not scrolled away by the usage);
//   - -h, --help (and the word help where a command is expected) print the
//     usage on stdout and exit 0;
//   - --version prints "NAME VERSION" on stdout and exits 0;
//   - 0 is done, 75 (TryLater) is try again later, and the codes between
//     are failures a retry will not fix, each with one meaning everywhere;
//   - a refusal goes to the journal, and to stderr too when stderr is a
//     terminal (journal.New arranges that).
//
// A helper builds one Command and calls Parse with a flag.FlagSet of its
// options (nil when it has none), once for the whole command line or once
// per sub-command:
//
//	cmd := cli.Command{Name: "vault", Usage: usage}
//	fs := flag.NewFlagSet("vault", flag.ContinueOnError)
//	watch := fs.Bool("watch", false, "...")
//	args, code, exit := cmd.Parse(fs, os.Args[1:])
//	if exit {
//		os.Exit(code)
//	}
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cocoonbox/cocoonbox/internal/version"
)

// Exit codes, the same meaning in every helper (docs/conventions.md's table). The
// numbers between 64 and 78 are sysexits(3)'s.
const (
	// OK: done, or nothing to do.
	OK = 0
	// Failed: a failure a retry will not fix that no code below names
	// (the journal entry says what).
	Failed = 1
	// Usage: the command line is wrong; the usage is on stderr.
	Usage = 2
	// Invalid: the input (stdin, a record, a file's content) breaks a
	// rule; the error names the input and the rule. EX_DATAERR.
	Invalid = 65
	// NoInput: an input that must exist is not there. EX_NOINPUT.
	NoInput = 66
	// Unavailable: a service the helper needs is not running (no session
	// manager on the bus). EX_UNAVAILABLE.
	Unavailable = 69
	// Unsafe: a path is unsafe to use (a symlink, another owner, group- or
	// world-writable, not a regular file or directory, oversize), or a
	// directory it must write under is missing. EX_CANTCREAT.
	Unsafe = 73
	// IO: an I/O error or a system call that failed. EX_IOERR.
	IO = 74
	// TryLater: a transient condition (a lock held, out of space or
	// memory, a busy peer); the same call may succeed later. EX_TEMPFAIL.
	TryLater = 75
)

// Command is one helper's command line: its name and its --help text.
type Command struct {
	// Name is the helper's name as it prefixes its messages and its
	// --version line, e.g. "vault".
	Name string
	// Usage is the whole --help text: the synopsis first ("usage: ..."),
	// then what it does, its options and its exit codes. It ends in a
	// newline.
	Usage string
	// Stdout and Stderr receive --help, --version and usage errors; nil
	// means the process's own.
	Stdout, Stderr io.Writer
}

func (c *Command) stdout() io.Writer {
	if c.Stdout != nil {
		return c.Stdout
	}
	return os.Stdout
}

func (c *Command) stderr() io.Writer {
	if c.Stderr != nil {
		return c.Stderr
	}
	return os.Stderr
}

// Parse parses args (without the program name) with fs, whose flags the
// caller defined; fs may be nil for a command without options. Parse adds
// --version (and -h/--help, which the flag package knows) and accepts the
// word "help" as the first argument. Parsing stops at the first argument
// that is not a flag; rest holds it and the ones after.
//
// When exit is true the caller exits with code at once: 0 after --help or
// --version (printed on stdout), Usage after a bad flag (the fault and the
// usage printed on stderr). Otherwise code is OK.
func (c *Command) Parse(fs *flag.FlagSet, args []string) (rest []string, code int, exit bool) {
	if fs == nil {
		fs = flag.NewFlagSet(c.Name, flag.ContinueOnError)
	}
	fs.Init(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // our own messages below, not the flag package's
	showVersion := false
	if fs.Lookup("version") == nil {
		fs.BoolVar(&showVersion, "version", false, "print the version and exit")
	}
	if len(args) > 0 && args[0] == "help" {
		fmt.Fprint(c.stdout(), c.Usage)
		return nil, OK, true
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout(), c.Usage)
			return nil, OK, true
		}
		return nil, c.UsageError("%v", err), true
	}
	if showVersion {
		fmt.Fprintln(c.stdout(), version.String(c.Name))
		return nil, OK, true
	}
	return fs.Args(), OK, false
}

// UsageError prints "NAME: " and the formatted fault on one line, then
// "run 'NAME --help' for usage", on stderr, and returns Usage for the
// caller to exit with.
func (c *Command) UsageError(format string, a ...any) int {
	msg := strings.TrimSuffix(fmt.Sprintf(format, a...), "\n")
	fmt.Fprintf(c.stderr(), "%s: %s\nrun '%s --help' for usage\n", c.Name, msg, c.Name)
	return Usage
}
