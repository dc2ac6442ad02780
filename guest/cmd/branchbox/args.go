package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

// Every argument is parsed here, on guest/cli's convention: `branchbox
// feature VERB NAME [flags] [-- argv]`; usage errors exit 2 with the usage
// on stderr, --help (anywhere) prints it on stdout and exits 0.

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
	cli        string
	lease      string
	requestID  string
	wait       int
	argv       []string
	// set are the flags given (an empty --run= is still checked).
	set map[string]bool
}

var verbFlags = map[string][]string{
	"check":         {"root", "run", "json"},
	"materialize":   {"root", "run", "json", "reuse"},
	"exec":          {"root", "run", "json", "consumer", "executable", "inherit"},
	"teardown":      {"root", "run", "json", "force"},
	"launch":        {"root", "run", "json", "devcontainer-cli"},
	"dispatch-tool": {"root", "run", "json", "lease", "request-id", "wait-seconds"},
}

// runOptional are the verbs the contract shows without --run: the run is
// the one materialized run of the feature NAME.
var runOptional = map[string]bool{"launch": true, "dispatch-tool": true}

// parseArgs returns the options, or exit true with the code to exit with
// (after printing the help, the version or the usage error).
func parseArgs(cmd *cli.Command, args []string) (o *options, code int, exit bool) {
	rest, code, exit := cmd.Parse(nil, args)
	if exit {
		return nil, code, true
	}
	switch {
	case len(rest) == 1 && rest[0] == "version":
		// The word form every cocoonbox binary has (internal/version).
		fmt.Fprintln(cmd.Stdout, version.String(cmd.Name))
		return nil, cli.OK, true
	case len(rest) == 0:
		return nil, cmd.UsageError("missing command"), true
	case rest[0] != "feature":
		return nil, cmd.UsageError("unknown command %q (only: feature)", rest[0]), true
	case len(rest) < 2:
		return nil, cmd.UsageError("missing verb after feature"), true
	}
	o = &options{verb: rest[1]}
	if o.verb == "help" || strings.HasPrefix(o.verb, "-") {
		_, code, exit = cmd.Parse(nil, rest[1:])
		if exit {
			return nil, code, true
		}
	}
	allowed, ok := verbFlags[o.verb]
	if !ok {
		return nil, cmd.UsageError("unknown verb %q (check, materialize, exec, teardown, launch, dispatch-tool)", o.verb), true
	}
	if len(rest) < 3 || strings.HasPrefix(rest[2], "-") {
		if len(rest) >= 3 {
			if _, code, exit = cmd.Parse(nil, rest[2:3]); exit {
				return nil, code, true
			}
		}
		return nil, cmd.UsageError("%s: missing feature NAME", o.verb), true
	}
	o.name = rest[2]
	fs := flag.NewFlagSet("branchbox", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", branchbox.Root, "")
	fs.StringVar(&o.runID, "run", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.force, "force", false, "")
	fs.BoolVar(&o.reuse, "reuse", false, "")
	fs.StringVar(&o.consumer, "consumer", "", "")
	fs.StringVar(&o.executable, "executable", "", "")
	fs.StringVar(&o.inherit, "inherit", "", "")
	fs.StringVar(&o.cli, "devcontainer-cli", "devcontainer", "")
	fs.StringVar(&o.lease, "lease", "", "")
	fs.StringVar(&o.requestID, "request-id", "", "")
	fs.IntVar(&o.wait, "wait-seconds", 0, "")
	if o.argv, code, exit = cmd.Parse(fs, rest[3:]); exit {
		return nil, code, true
	}
	var bad []string
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		o.set[f.Name] = true
		for _, a := range allowed {
			if a == f.Name {
				return
			}
		}
		bad = append(bad, "--"+f.Name)
	})
	switch {
	case len(bad) > 0:
		return nil, cmd.UsageError("%s does not take %s", o.verb, strings.Join(bad, ", ")), true
	case !o.set["run"] && !runOptional[o.verb]:
		return nil, cmd.UsageError("%s: --run RUN_ID is required", o.verb), true
	case o.verb == "dispatch-tool" && (!o.set["lease"] || !o.set["request-id"]):
		return nil, cmd.UsageError("dispatch-tool: --lease and --request-id are required"), true
	case o.wait < 0 || o.wait > 3600:
		return nil, cmd.UsageError("--wait-seconds %d: a wait is 0 to 3600 seconds", o.wait), true
	case o.verb == "exec" && (!o.set["consumer"] || !o.set["executable"]):
		return nil, cmd.UsageError("exec: --consumer and --executable are required"), true
	case o.verb != "exec" && len(o.argv) > 0:
		return nil, cmd.UsageError("%s: unexpected argument %q", o.verb, o.argv[0]), true
	}
	return o, cli.OK, false
}

// arguments are the values given that become a path or a name (NAME, a
// run id, a lease, a request id, a consumer, an executable, inherited
// names), each with the manifest field whose grammar it must meet; run
// checks them all (branchbox.CheckArguments) before it opens any file.
func (o *options) arguments() []branchbox.Argument {
	args := []branchbox.Argument{{Flag: "NAME", Field: "feature", Value: o.name}}
	for _, a := range []branchbox.Argument{{Flag: "--run", Field: "run_id", Value: o.runID},
		{Flag: "--lease", Field: "lease_id", Value: o.lease}, {Flag: "--request-id", Field: "request_id", Value: o.requestID},
		{Flag: "--consumer", Field: "consumer", Value: o.consumer}, {Flag: "--executable", Field: "executable", Value: o.executable}} {
		if o.set[strings.TrimPrefix(a.Flag, "--")] {
			args = append(args, a)
		}
	}
	if o.set["inherit"] {
		for _, n := range strings.Split(o.inherit, ",") {
			args = append(args, branchbox.Argument{Flag: "--inherit", Field: "environment_name", Value: n})
		}
	}
	return args
}
