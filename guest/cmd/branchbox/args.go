package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// Every argument is parsed here, on internal/command's convention (the
// one of every cocoonbox binary): `branchbox feature VERB NAME [flags]
// [-- argv]`; a usage error exits 2 with the fault and the line naming
// the verb's --help, --help prints the verb's help on stdout, exit 0.

// options are a verb's flags and arguments.
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

// verbs are the verbs, their synopsis, their help and the flags each
// takes beside --root, --run and --json.
var verbs = []struct {
	use, short, long, example string
	flags                     []string
}{
	{"check NAME", "Validate the assignment and print what it would do", checkLong,
		"  branchbox feature check coding-demo --run run-demo --json", nil},
	{"materialize NAME", "Check out the run's workspace and record its ledger", materializeLong,
		"  branchbox feature materialize coding-demo --run run-demo", []string{"reuse"}},
	{"exec NAME [-- ARGS...]", "Start the provider executable for a consumer", execLong,
		"  branchbox feature exec coding-demo --run run-demo --consumer coding-agent --executable claude -- --help",
		[]string{"consumer", "executable", "inherit"}},
	{"teardown NAME", "Remove the run's workspace, sources and state; write the receipt", teardownLong,
		"  branchbox feature teardown coding-demo --run run-demo --force", []string{"force"}},
	{"launch NAME", "Start the managed Dev Container of a materialized run", launchLong,
		"  branchbox feature launch coding-demo --json", []string{"devcontainer-cli"}},
	{"dispatch-tool NAME", "Handle one request of a tool-request lease", dispatchToolLong,
		"  branchbox feature dispatch-tool coding-demo --lease delivery_requests --request-id r1 --wait-seconds 30",
		[]string{"lease", "request-id", "wait-seconds"}},
}

// runOptional are the verbs the contract shows without --run: the run is
// the one materialized run of the feature NAME.
var runOptional = map[string]bool{"launch": true, "dispatch-tool": true}

// newRoot is branchbox's command tree; each verb runs do with its
// options and ends with do's exit code.
func newRoot(do func(o *options) int) *cobra.Command {
	root := &cobra.Command{
		Use:   "branchbox",
		Short: "The BranchBox in-guest runtime",
		Long: "branchbox is the BranchBox in-guest runtime: it checks an orchestrator's assignment,\n" +
			"materializes it, starts a provider for a consumer and tears it down.\n\n" + rootLong,
		Example: "  branchbox feature check coding-demo --run run-demo\n  branchbox feature teardown coding-demo --run run-demo --json",
	}
	feature := &cobra.Command{
		Use:     "feature",
		Short:   "The verbs on one feature's run",
		Long:    rootLong,
		Example: root.Example,
	}
	for _, v := range verbs {
		o := &options{}
		verb := &cobra.Command{Use: v.use, Short: v.short, Long: v.long, Example: v.example, Args: nameArgs}
		fs := verb.Flags()
		fs.StringVar(&o.root, "root", branchbox.Root, "the runtime's `DIR`")
		fs.StringVar(&o.runID, "run", "", "the run's `RUN_ID`")
		fs.BoolVar(&o.json, "json", false, "print one JSON object on stdout")
		for _, f := range v.flags {
			switch f {
			case "reuse":
				fs.BoolVar(&o.reuse, f, false, "take the existing branch (versions 1 and 2)")
			case "consumer":
				fs.StringVar(&o.consumer, f, "", "the consumer `C`")
			case "executable":
				fs.StringVar(&o.executable, f, "", "the provider executable `E`")
			case "inherit":
				fs.StringVar(&o.inherit, f, "", "environment names `A,B` passed through from branchbox's own")
			case "force":
				fs.BoolVar(&o.force, f, false, "tear down a version 3 run (no dirty-worktree check)")
			case "devcontainer-cli":
				fs.StringVar(&o.cli, f, "devcontainer", "the Dev Containers CLI's `PATH`")
			case "lease":
				fs.StringVar(&o.lease, f, "", "the tool-request lease `L`")
			case "request-id":
				fs.StringVar(&o.requestID, f, "", "the request's `ID`")
			case "wait-seconds":
				fs.IntVar(&o.wait, f, 0, "wait up to `S` seconds for the request, 0 to 3600")
			}
		}
		verb.RunE = func(cmd *cobra.Command, args []string) error {
			o.verb, o.name = cmd.Name(), args[0]
			words := args
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				words, o.argv = args[:dash], args[dash:]
			}
			if len(words) > 1 {
				return command.Usagef("%s: unexpected argument %q", o.verb, words[1])
			}
			o.set = map[string]bool{}
			cmd.Flags().Visit(func(f *command.Flag) { o.set[f.Name] = true })
			if err := o.check(); err != nil {
				return err
			}
			if code := do(o); code != exitOK {
				return command.Exit(code)
			}
			return nil
		}
		feature.AddCommand(verb)
	}
	root.AddCommand(feature)
	return command.New(root)
}

// nameArgs is a verb's NAME, then (exec) the provider's ARGS after --.
func nameArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
		return command.Usagef("%s: missing feature NAME", cmd.Name())
	}
	if dash := cmd.ArgsLenAtDash(); dash > 0 && dash < len(args) && cmd.Name() != "exec" {
		return command.Usagef("%s: unexpected argument %q", cmd.Name(), args[dash])
	}
	return nil
}

// check refuses what the flags alone cannot say: the flags a verb
// requires and the bound of --wait-seconds.
func (o *options) check() error {
	switch {
	case !o.set["run"] && !runOptional[o.verb]:
		return command.Usagef("%s: --run RUN_ID is required", o.verb)
	case o.verb == "dispatch-tool" && (!o.set["lease"] || !o.set["request-id"]):
		return command.Usagef("dispatch-tool: --lease and --request-id are required")
	case o.wait < 0 || o.wait > 3600:
		return command.Usagef("--wait-seconds %d: a wait is 0 to 3600 seconds", o.wait)
	case o.verb == "exec" && (!o.set["consumer"] || !o.set["executable"]):
		return command.Usagef("exec: --consumer and --executable are required")
	}
	return nil
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
