// Command cocoonbox-api is the control plane: one server (the console, the
// OAuth endpoints and gRPC on one listener) on PostgreSQL, embedded under
// its state directory by default, and the admin commands on its accounts.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

func main() {
	os.Exit(command.Execute(newRoot()))
}

// newRoot is the binary's command tree, set up by command.New.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "cocoonbox-api",
		Short: "The cocoonbox control plane and the admin commands on its accounts",
		Long: `cocoonbox-api is the control plane: one server (the console at /cb/, the OAuth
endpoints and gRPC on one listener; /healthz) on PostgreSQL, embedded under its
state directory by default, and the admin commands on its accounts.

Every command but version takes --config FILE (api.yaml) and --state-dir DIR;
serve also takes --listen ADDR.

Exit codes: 0 done, 1 failed, 2 bad usage, 130 interrupted (Ctrl-C).`,
		Example: `  cocoonbox-api serve --config /etc/cocoonbox/api.yaml
  cocoonbox-api users add alice --admin --state-dir /var/lib/cocoonbox-api
  cocoonbox-api users list --json`,
	}
	root.AddCommand(serveCommand(), usersCommand())
	return command.New(root)
}
