// Command cocoonbox-api is the control plane: one server (the console, the
// OAuth endpoints and gRPC on one listener) on PostgreSQL, embedded under
// its state directory by default, and the admin commands on its accounts.
package main

import (
	"github.com/cocoonbox/cocoonbox/internal/version"

	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: cocoonbox-api COMMAND [flags]

commands:
  serve                   run the api (the console at /cb/, OAuth, gRPC; /healthz)
  users add NAME [--admin]  make an account (password from stdin, or asked at a terminal)
  users list [--json]     list the accounts
  users disable NAME      stop an account's sign-ins and tokens (until enabled)
  users enable NAME       let a disabled account in again
  users delete NAME --confirm
                          remove an account with its tokens, sessions and boxes
  users passwd NAME       set an account's password (stdin or a prompt)
  users limits NAME [--max-boxes N] [--max-running N] [--json]
                          print or set an account's box limits (0 to 64 each)
  version, --version      print "cocoonbox-api RELEASE (REVISION)"

Every command but version takes --config FILE (api.yaml) and --state-dir DIR;
serve also takes --listen ADDR. 'cocoonbox-api COMMAND --help' tells more.

exit codes: 0 done, 1 failed, 2 bad usage.
`

// errUsage marks an error as bad usage (exit code 2).
var errUsage = errors.New("usage")

func main() {
	err := run(os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "cocoonbox-api:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "cocoonbox-api:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("%w: no command", errUsage)
	}
	switch args[0] {
	case "version", "--version":
		fmt.Println(version.String("cocoonbox-api"))
		return nil
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	case "serve":
		return serve(args[1:])
	case "users":
		return usersCmd(args[1:])
	}
	return fmt.Errorf("%w: unknown command %q (commands: serve, users, version; see --help)", errUsage, args[0])
}
