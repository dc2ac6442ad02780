// Command cocoonbox is the user's CLI: it signs in to the api through the
// browser (RFC 8252 loopback, client cocoonbox-cli), keeps the token in
// cli.json, lists and revokes the user's devices, lists, creates, wakes,
// hibernates, saves, upgrades and deletes the user's boxes (following each
// operation's phases), runs commands in a box (rsh), and offloads a
// repository's task into a box and back (packer).
//
// Exit codes: 0 done, 1 the api or the browser said no (a box operation
// failed; offload, back: a step failed and was rolled back as said), 2 bad
// usage, 3 offload or back refused with nothing changed; rsh ends with the
// remote command's status, or its own (see usage).
//
// Contract: Browser sign-in and device tokens; Sign-in with GitHub and
// signup (invite); Boxes (api) ↔ sandboxd;
// Remote command (Session.Exec, cocoonbox rsh); Offload.
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/internal/command"
)

func main() {
	os.Exit(command.Execute(newRoot()))
}

// run runs the CLI on args as main does, without the exit: a failed
// --json command prints its JSON error object on stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	err := command.Run(ctx, newRoot(), args, stdin, stdout, os.Stderr)
	if err != nil && wantsJSON(args) {
		printJSONError(stdout, err)
	}
	return err
}

// runner is a command's action: its arguments and the endpoint's state
// (nil for a command that loads it itself, after checks of its own).
type runner func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error

// leaf makes c run what define returns, define having added c's flags
// beside --endpoint; c.Args defaults to no argument. The endpoint's
// state is loaded first unless lazy.
func leaf(c *cobra.Command, lazy bool, define func(fs *command.Flags) runner) *cobra.Command {
	endpoint := c.Flags().String("endpoint", "", "the api's `URL` (default: $COCOONBOX_ENDPOINT, else your last login's)")
	run := define(c.Flags())
	if c.Args == nil {
		c.Args = command.NoArgs
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		var st *state
		if !lazy {
			var err error
			if st, err = loadState(*endpoint); err != nil {
				return err
			}
		}
		return run(cmd.Context(), args, st, cmd.InOrStdin(), cmd.OutOrStdout())
	}
	return c
}
