// Command branchbox is the BranchBox in-guest runtime (Contract: BranchBox
// managed runtime manifest): it checks an orchestrator's assignment,
// materializes it, starts a provider for a consumer and tears it down.
// The usage text below is its manual; docs/branchbox.md has
// the JSON of every verb.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// Exit codes: guest/cli's table.
const (
	exitOK       = cli.OK
	exitFailed   = cli.Failed
	exitUsage    = cli.Usage
	exitInvalid  = cli.Invalid
	exitNoInput  = cli.NoInput
	exitUnsafe   = cli.Unsafe
	exitIO       = cli.IO
	exitTryLater = cli.TryLater
)

// MESSAGE_IDs of branchbox's journal entries (catalog:
// /usr/lib/systemd/catalog/cocoonbox-branchbox.catalog).
const (
	msgRefused  = "3f6c1a0e2b8d4c57a1e9d2b7c4f08a61"
	msgDone     = "8b2e5d71c9a34f06b8d1e6a2f3c79b45"
	msgResidue  = "c41d8e2a7b5f4a93b06e1d9c2a8f7e30"
	msgProvider = "5a9e3c17d2b64e08a7f1c5d3b9e2a640"
	msgDispatch = "7d3a9c51e6b24f80a9c2d4e1b7f63a58"
	msgStep     = "2e8b6f04c1d94a7bb3e5a9d1c6f27e13"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type env struct {
	o      *options
	stdout io.Writer
	stderr io.Writer
	log    *journal.Logger
	opt    branchbox.Options
}

// run runs branchbox on args as main does: its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(func(o *options) int { return runVerb(o, stdout, stderr) })
	return command.Report(stderr, "branchbox", command.Run(context.Background(), root, args, os.Stdin, stdout, stderr))
}

// runVerb runs the verb o names, its arguments parsed.
func runVerb(o *options, stdout, stderr io.Writer) int {
	var err error
	e := &env{o: o, stdout: stdout, stderr: stderr, log: journal.New("branchbox"),
		opt: branchbox.Options{Root: o.root}}
	e.log.Stderr = io.Discard
	if err := branchbox.CheckArguments(o.arguments()...); err != nil {
		return e.fail(err)
	}
	if !o.set["run"] {
		if o.runID, err = findRun(o.root, o.name); err != nil {
			return e.fail(err)
		}
	}
	e.log.Set("BRANCHBOX_RUN_ID", o.runID)
	// dispatch-tool waits for minutes beside the provider and other
	// dispatchers: each request id has its own lock (toolrequest's lockRequest).
	if o.verb != "check" && o.verb != "dispatch-tool" {
		unlock, err := e.lockRun()
		if err != nil {
			return e.fail(err)
		}
		defer unlock()
	}
	switch o.verb {
	case "check":
		return e.check()
	case "materialize":
		return e.materialize()
	case "exec":
		return e.exec()
	case "teardown":
		return e.teardown()
	case "launch":
		return e.launch()
	case "dispatch-tool":
		return e.dispatch()
	}
	return exitUsage
}

// fail reports err (as JSON with --json, else one line on stderr), logs
// it, and returns its exit code.
func (e *env) fail(err error) int {
	code := exitCode(err)
	e.log.Send(journal.Warning, msgRefused, fmt.Sprintf("%s %s refused: %v", e.o.verb, e.o.name, err),
		"BRANCHBOX_RULE", string(branchbox.RuleOf(err)))
	if e.o.json {
		out := map[string]any{"status": "refused", "verb": e.o.verb, "error": err.Error(), "exit_code": code,
			"retryable": code == exitTryLater}
		var re *branchbox.RuleError
		if errors.As(err, &re) {
			out["rule"], out["where"] = re.Rule, re.Where
		} else {
			out["status"] = "failed"
		}
		e.printJSON(out)
	} else {
		fmt.Fprintf(e.stderr, "branchbox: %s: %v\n", e.o.verb, err)
	}
	return code
}

func (e *env) printJSON(v any) {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// placeRules are refusals of where a file is rather than what it says.
var placeRules = map[branchbox.Rule]bool{
	branchbox.RuleRunDirectory: true, branchbox.RuleOwnerOnly: true, branchbox.RuleSourceType: true,
	branchbox.RuleGitMetadata: true,
}

func exitCode(err error) int {
	var re *branchbox.RuleError
	switch {
	case errors.As(err, &re) && re.Rule == branchbox.RuleRunDirectory && re.Detail == "does not exist":
		return exitNoInput
	case errors.As(err, &re) && placeRules[re.Rule]:
		return exitUnsafe
	case errors.As(err, &re):
		return exitInvalid
	case errors.Is(err, errBusy), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.ENOMEM), errors.Is(err, unix.EAGAIN):
		return exitTryLater
	case errors.Is(err, fs.ErrNotExist):
		return exitNoInput
	case errors.Is(err, fs.ErrPermission):
		return exitUnsafe
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return exitIO
	}
	return exitFailed
}
