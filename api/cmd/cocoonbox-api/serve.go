package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/cocoonbox/cocoonbox/api/apiserver"
)

func serve(args []string) error {
	var c common
	fs := newFlags("serve", "serve [--config FILE] [--state-dir DIR] [--listen ADDR]", &c, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments, got %q", errUsage, fs.Args())
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	log := newLogger(cfg, os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

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
