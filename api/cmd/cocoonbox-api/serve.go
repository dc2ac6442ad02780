package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/api/apiserver"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// serveCommand is `serve`: SIGTERM stops it cleanly, exit 0 (systemd's
// stop); Ctrl-C stops it the same way, exit 130 as every command's.
func serveCommand() *cobra.Command {
	var c common
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the api: the console at /cb/, OAuth, gRPC; /healthz",
		Long: `Run the api: the console at /cb/, the OAuth endpoints and gRPC on one
listener (--listen, else listen of the config, 127.0.0.1:18200), /healthz. The
port is taken first, so one in use fails at once, before the database is
built. SIGTERM stops it (exit 0 when clean), as does Ctrl-C (SIGINT, exit 130).`,
		Example: `  cocoonbox-api serve --state-dir /var/lib/cocoonbox-api
  cocoonbox-api serve --config /etc/cocoonbox/api.yaml --listen 0.0.0.0:18200`,
		Args:        command.NoArgs,
		Annotations: map[string]string{command.CleanStop: "SIGTERM"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), &c)
		},
	}
	c.flags(cmd.Flags(), true)
	return cmd
}

// serve runs the api until ctx ends.
func serve(ctx context.Context, c *common) error {
	cfg, err := c.load()
	if err != nil {
		return err
	}
	log := newLogger(cfg, os.Stderr)
	// The port first: one in use fails at once, before the database is
	// built (seconds for the embedded cluster) or the state directory made.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	api, err := apiserver.New(ctx, cfg, apiserver.Options{Log: log})
	if err != nil {
		return err
	}
	defer api.Close()
	return api.Serve(ctx, ln)
}
