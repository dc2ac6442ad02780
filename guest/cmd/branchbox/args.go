package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// Every argument is parsed here: `branchbox feature VERB NAME [flags] [--
// argv]`. The shared guest/cli convention (usage errors exit 2, --help on
// stdout) is followed by hand until it lands; switching is this file.

// options are every verb's flags; a verb refuses the ones it does not take.
type options struct {
	verb, name string
	root       string
	runID      string
	json       bool
	force      bool
	reuse      bool
	consumer   string
	executable string
	inherit    string
	argv       []string
}

// errUsage marks a command-line fault (exit 2, usage on stderr).
type errUsage struct{ msg string }

func (e *errUsage) Error() string { return e.msg }

func usageErr(format string, a ...any) error { return &errUsage{fmt.Sprintf(format, a...)} }

var verbFlags = map[string][]string{
	"check":       {"root", "run", "json"},
	"materialize": {"root", "run", "json", "reuse"},
	"exec":        {"root", "run", "json", "consumer", "executable", "inherit"},
	"teardown":    {"root", "run", "json", "force"},
}

// parseArgs returns the options, or errHelp (print usage, exit 0), or an
// *errUsage.
func parseArgs(args []string) (*options, error) {
	if len(args) == 0 {
		return nil, usageErr("missing command")
	}
	switch args[0] {
	case "-h", "--help", "help":
		return nil, errHelp
	case "--version":
		return nil, errVersion
	case "feature":
	default:
		return nil, usageErr("unknown command %q (only: feature)", args[0])
	}
	if len(args) < 2 {
		return nil, usageErr("missing verb after feature")
	}
	o := &options{verb: args[1]}
	if o.verb == "-h" || o.verb == "--help" || o.verb == "help" {
		return nil, errHelp
	}
	allowed, ok := verbFlags[o.verb]
	if !ok {
		return nil, usageErr("unknown verb %q (check, materialize, exec, teardown)", o.verb)
	}
	if len(args) < 3 || strings.HasPrefix(args[2], "-") {
		if len(args) >= 3 && (args[2] == "-h" || args[2] == "--help") {
			return nil, errHelp
		}
		return nil, usageErr("%s: missing feature NAME", o.verb)
	}
	o.name = args[2]
	fs := flag.NewFlagSet("branchbox", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.root, "root", branchbox.Root, "")
	fs.StringVar(&o.runID, "run", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.force, "force", false, "")
	fs.BoolVar(&o.reuse, "reuse", false, "")
	fs.StringVar(&o.consumer, "consumer", "", "")
	fs.StringVar(&o.executable, "executable", "", "")
	fs.StringVar(&o.inherit, "inherit", "", "")
	if err := fs.Parse(args[3:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usageErr("%s: %v", o.verb, err)
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		for _, a := range allowed {
			if a == f.Name {
				return
			}
		}
		bad = append(bad, "--"+f.Name)
	})
	if len(bad) > 0 {
		return nil, usageErr("%s does not take %s", o.verb, strings.Join(bad, ", "))
	}
	if o.runID == "" {
		return nil, usageErr("%s: --run RUN_ID is required", o.verb)
	}
	o.argv = fs.Args()
	if o.verb == "exec" {
		if o.consumer == "" || o.executable == "" {
			return nil, usageErr("exec: --consumer and --executable are required")
		}
	} else if len(o.argv) > 0 {
		return nil, usageErr("%s: unexpected argument %q", o.verb, o.argv[0])
	}
	return o, nil
}

var (
	errHelp    = errors.New("help")
	errVersion = errors.New("version")
)
