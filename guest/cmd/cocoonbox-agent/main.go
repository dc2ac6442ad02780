// Command cocoonbox-agent is the box's agent binary (Contract: Guest
// (image) ↔ agent, Agent binary). This build carries its offload verbs,
// the box packer and the inbox (Contract: Offload); serve and
// toolhost-service need shuttle and the model gateway and are not in it.
//
//	cocoonbox-agent offload VERB [flags]
//
// Each verb but watch (a line per change, see watch.go) prints exactly one JSON line on stdout, {"ok":true,...} or
// {"ok":false,"code":"usage|refused|failed|inbox","error":"..."}; stderr
// carries progress for a person. Neither ever carries a secret. Exit
// codes are the contract's, which win over guest/cli's table where they
// differ (3 and 4 mean other things there; no verb exits 75): 0 done; 1
// failed, rolled back as stated; 2 usage; 3 refused, nothing changed; 4
// inbox, the inbox is not running. The command line itself follows
// guest/cli: --help and --version on stdout, exit 0; a usage error on
// stderr with the usage, exit 2.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/offload"
	"github.com/cocoonbox/cocoonbox/guest/offload/verbs"
)

// The verbs' exit codes (Contract: Offload, Verbs). 0 to 2 are
// guest/cli's too; 3 and 4 are the contract's own.
const (
	exitOK      = cli.OK
	exitFailed  = cli.Failed
	exitUsage   = cli.Usage
	exitRefused = 3
	exitInbox   = 4
)

const usage = `usage: cocoonbox-agent offload VERB [flags]   (cocoonbox-agent offload VERB --help for one verb)

The box packer and inbox of an offload (Contract: Offload). Every verb prints one
JSON line on stdout; progress goes to stderr.

  begin --repo K --name N --kind C --id ID [--no-repo]   preflight, take the copy
  send --repo K --kind C --id ID [--prepare] [--no-repo] < stream
  send --repo K (--message | --back) [--interrupt] < text
  read --repo K [--since N] [--wait S]                    outbox entries after N
  status [--repo K]                                       the sessions
  end --repo K                                            end the CLI, wipe secrets, return the copy
  wipe-secrets --repo K                                   remove the repo's secrets now
  restart --repo K                                        restart the CLI from its last hand-over
  post (--progress | --question | --back) [--repo K] < body
  env [--repo K] [--no-wait] [--json]                     the environment step's report
  event --repo K --cli C --hook NAME [payload] < payload  a CLI hook's report
  watch                                                   a JSON line per session, then per change, until the inbox goes
  serve                                                   the inbox (cocoonbox-offload-inbox.service)

Exit codes: 0 done; 1 failed, rolled back; 2 usage; 3 refused, nothing changed;
4 the inbox is not running.

Not in this build: cocoonbox-agent serve and toolhost-service (they need shuttle
and the model gateway); they exit 2.
`

func main() {
	cmd := cli.Command{Name: "cocoonbox-agent", Usage: usage}
	args, code, exit := cmd.Parse(nil, os.Args[1:])
	if exit {
		os.Exit(code)
	}
	switch {
	case len(args) == 0:
		os.Exit(cmd.UsageError("a command is needed"))
	case args[0] == "serve" || args[0] == "toolhost-service":
		os.Exit(cmd.UsageError("%s is not in this build: it needs shuttle and the model gateway", args[0]))
	case args[0] != "offload":
		os.Exit(cmd.UsageError("unknown command %q", args[0]))
	case len(args) < 2:
		os.Exit(cmd.UsageError("offload needs a verb"))
	case args[1] == "-h" || args[1] == "--help" || args[1] == "help":
		fmt.Print(usage)
		return
	}
	os.Exit(run(args[1], args[2:]))
}

// verbError is a verb's outcome other than done: the code of the stdout
// line and the exit code.
type verbError struct {
	code string
	exit int
	err  error
	// printed: the usage error is on stderr already.
	printed bool
	// extra fields for the stdout line (begin's findings and cli).
	extra map[string]any
}

func (e *verbError) Error() string { return e.err.Error() }

func usageErr(format string, a ...any) error {
	return &verbError{code: "usage", exit: exitUsage, err: fmt.Errorf(format, a...)}
}

// classify maps an error of the packer or the inbox to the contract's
// code and exit status.
func classify(err error) *verbError {
	var ve *verbError
	var ref *verbs.Refusal
	var fail *verbs.Failure
	var ie *offload.Error
	switch {
	case errors.As(err, &ve):
		return ve
	case errors.Is(err, offload.ErrInboxDown):
		return &verbError{code: "inbox", exit: exitInbox, err: err}
	case errors.As(err, &ref):
		return &verbError{code: "refused", exit: exitRefused, err: err}
	case errors.As(err, &fail):
		return &verbError{code: "failed", exit: exitFailed, err: err}
	case errors.As(err, &ie) && ie.Code == offload.CodeInvalid:
		return &verbError{code: "usage", exit: exitUsage, err: err}
	case errors.As(err, &ie) && ie.Code == offload.CodeRefused:
		return &verbError{code: "refused", exit: exitRefused, err: err}
	}
	return &verbError{code: "failed", exit: exitFailed, err: err}
}

// run runs one verb and prints its one stdout line.
func run(verb string, args []string) int {
	out, err := dispatch(verb, args)
	if err != nil {
		ve := classify(err)
		line := map[string]any{"ok": false, "code": ve.code, "error": oneLine(ve.err.Error())}
		for k, v := range ve.extra {
			line[k] = v
		}
		printJSON(line)
		if ve.exit == exitUsage && !ve.printed {
			fmt.Fprintf(os.Stderr, "cocoonbox-agent offload %s: %v\n", verb, ve.err)
		}
		return ve.exit
	}
	if out == nil {
		return exitOK // help was printed
	}
	out["ok"] = true
	printJSON(out)
	return exitOK
}

func printJSON(v any) {
	data, _ := json.Marshal(v)
	os.Stdout.Write(append(data, '\n'))
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "offload: "+format+"\n", a...)
}
