package main

import (
	"context"
	"fmt"
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

	return apiserver.Serve(ctx, cfg, log)
}
