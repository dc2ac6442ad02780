// Command branchbox is the BranchBox in-guest runtime (Contract: BranchBox
// managed runtime manifest): it checks an orchestrator's assignment,
// materializes it, starts a provider for a consumer and tears it down.
// The usage text below is its manual; docs/branchbox.md has
// the JSON of every verb.
package main

import (
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
)

const usage = `usage: branchbox feature check       NAME --run RUN_ID [--root DIR] [--json]
       branchbox feature materialize NAME --run RUN_ID [--root DIR] [--json] [--reuse]
       branchbox feature exec        NAME --run RUN_ID --consumer C --executable E [--inherit A,B] [--root DIR] [--json] [-- ARGS...]
       branchbox feature teardown    NAME --run RUN_ID [--root DIR] [--json] [--force]
       branchbox feature launch      NAME [--run RUN_ID] [--devcontainer-cli PATH] [--root DIR] [--json]
       branchbox feature dispatch-tool NAME [--run RUN_ID] --lease L --request-id ID [--wait-seconds S] [--root DIR] [--json]
       branchbox --version | --help

The assignment is DIR/managed/RUN_ID/assignment.json (DIR defaults to
/run/branchbox); NAME must be its "feature". Every verb checks the whole
assignment first (strict JSON, every rule of the security contract, on
opened descriptors) and refuses with the rule broken and the path.

check        validate the assignment and print what it would do.
materialize  check the repository's shared Git metadata (runtime-owned, not
             group/other-writable, no replaceable ancestor), check out a
             new branch at the signed base into the new workspace
             directory and record the run's ledger
             (DIR/state/RUN_ID/ledger.json). Version 3 delegates the
             workspace and the shared Git metadata to the workspace
             consumer's group; --reuse and an existing branch are refused
             (versions 1 and 2: --reuse takes the existing branch).
exec         start the executable for the consumer: only when it and the
             --inherit names match one live model-identity lease exactly;
             its environment is only PATH=/usr/local/bin:/usr/bin:/bin,
             the inherited names from branchbox's own environment and the
             consumer's digest-checked provider-environment values.
             branchbox execs it (as the version 3 workspace consumer, else
             the run's owner; in the workspace when it exists), so its exit
             status is the provider's.
teardown     remove the workspace, the run directory with every source
             (non-empty shared directories and sockets too) and the state
             directory with the ledger; write the receipt
             DIR/receipts/RUN_ID.json naming every path removed and any
             residue. --force is required for version 3: its consumer
             could edit the shared Git metadata, and no dirty-worktree
             check is made (commit what you want to keep first).

launch       (version 3, materialized) start the managed Dev Container:
             the repository's devcontainer.json and Compose files checked,
             the Compose facade written to DIR/state/RUN_ID/facade, every
             assigned image inspected locally (nothing built or pulled),
             the workspace copied into the volume branchbox-RUN_ID-workspace,
             then the Dev Containers CLI's up (PATH, default devcontainer);
             the final inspection of the primary container's mounts and
             seccomp profile, its provider user's UID (the kernel's, of a
             process started as that user) against the workspace copy's
             owner and consumer_uid, each request spool initialized, the port proxy
             started. Any failure removes what was started; what a killed
             launch of the run left (labelled with the run) is removed
             first. Without --run, the one materialized run of NAME.
dispatch-tool  handle one request of tool-request lease L: the provider
             user checked again, then requests/ID.json claimed, recorded,
             relayed to the linked endpoint and answered in responses/ID.json
             (docs/branchbox.md). Exit 75 with {"status":"not-pending",
             "retryable":true} when no request arrived within S seconds
             (default 0: look once), or {"status":"transport-retry"} when a
             signed exact replay could not reach the endpoint in time;
             every refusal is terminal (65, 73, ...), never 75.

--json prints one JSON object on stdout: check's report, or any verb's
refusal ({"status":"refused"|"failed","rule":...,"where":...,"error":...,
"exit_code":...,"retryable":...}), materialize's
{"status":"materialized","workspace":...,"sources":...,"ledger":...},
teardown's receipt {"removed":[...],"residue":[{"path","error"}],
"residue_free":...,"receipt_path":...} (engine objects as "docker
container NAME", network, volume), launch's {"status":"launched",
"launch":{...}}, dispatch-tool's {"status":"dispatched","request_id",
"response","cached"}.

exit codes: 0 done; 1 a failure a retry will not fix; 2 usage; 65 the
assignment, or an argument (NAME, --run, --lease, --request-id,
--consumer, --executable, --inherit: each held to its manifest field's
grammar before any file is opened), breaks a rule (the error names it); 66 no such run; 73 an unsafe
path (symlink, owner, mode, links); 74 an I/O error; 75 try again later
(out of space or memory; another branchbox holds the run's lock,
DIR/locks/RUN_ID.lock, taken by materialize, exec and teardown); after exec, the provider's own;
teardown with residue exits 1 (the receipt lists it).
`

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

func run(args []string, stdout, stderr io.Writer) int {
	o, code, exit := parseArgs(&cli.Command{Name: "branchbox", Usage: usage, Stdout: stdout, Stderr: stderr}, args)
	if exit {
		return code
	}
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
