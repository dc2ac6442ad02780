package main

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// common are the flags every command but version takes.
type common struct {
	configFile string
	stateDir   string
	listen     string
}

// flags defines --config and --state-dir (and --listen) on fs.
func (c *common) flags(fs *command.Flags, withListen bool) {
	fs.Func("config", "the api.yaml `FILE` to read (default: none, the built-in defaults)", nonEmpty(&c.configFile, "a file"))
	fs.Func("state-dir", "the api's state directory `DIR` (default: state_dir of the config, /var/lib/cocoonbox-api)", nonEmpty(&c.stateDir, "a directory"))
	if withListen {
		fs.Func("listen", "`HOST:PORT` to serve on (default: listen of the config, 127.0.0.1:18200)", nonEmpty(&c.listen, "host:port"))
	}
}

// nonEmpty sets *to from a flag's value, refusing an empty one: an empty
// --state-dir read as "not given" sent an admin command to the default
// state directory.
func nonEmpty(to *string, what string) func(string) error {
	return func(s string) error {
		if s == "" {
			return fmt.Errorf("empty: name %s", what)
		}
		*to = s
		return nil
	}
}

// load is the configuration: the file when given, then the flags over it.
func (c *common) load() (config.Config, error) {
	cfg := config.Default()
	if c.configFile != "" {
		var err error
		if cfg, err = config.Load(c.configFile); err != nil {
			return cfg, err
		}
	}
	if c.stateDir != "" {
		abs, err := filepath.Abs(c.stateDir)
		if err != nil {
			return cfg, fmt.Errorf("--state-dir: %w", err)
		}
		cfg.StateDir = abs
	}
	if c.listen != "" {
		cfg.Listen = c.listen
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%w (from --listen, --state-dir or the config)", err)
	}
	return cfg, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
