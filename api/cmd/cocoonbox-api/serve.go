package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/api/server"
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

	start := time.Now()
	db, err := openDB(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer db.Close(ctx)

	srv := server.New(log, func(ctx context.Context) error { return db.Pool.Ping(ctx) })

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("serving", "addr", ln.Addr().String(), "issuer", cfg.Issuer(), "state_dir", cfg.StateDir,
		"database", map[bool]string{true: "embedded", false: "database.url"}[cfg.Database.URL == ""], "ready_in", time.Since(start).Round(time.Millisecond))
	return srv.Serve(ctx, ln)
}
