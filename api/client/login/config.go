package login

// cli.json: the token of each endpoint with its source, so that logout
// revokes only a token the CLI got through the browser, never one pasted
// from the app.
//
// The file is $XDG_CONFIG_HOME/cocoonbox/cli.json (~/.config/cocoonbox/cli.json),
// mode 0600 in a 0700 directory, written whole under a temporary name and
// renamed into place, so a crash leaves the old file or the new one.
//
//	{"endpoint": "http://127.0.0.1:18200",
//	 "endpoints": {"http://127.0.0.1:18200": {"token": "cb_…", "source": "browser"}}}
//
// Contract: Browser sign-in and device tokens.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// The sources of a token, as the contract names them.
const (
	SourceBrowser = "browser" // cocoonbox login: a device token the CLI may revoke
	SourcePaste   = "paste"   // cocoonbox login --token-stdin: never revoked by logout
	SourceApp     = "app"     // copied from the app: never revoked by logout
)

// Saved is the token of one endpoint.
type Saved struct {
	Token  string `json:"token"`
	Source string `json:"source"`
}

// Config is cli.json. Endpoint is the one commands use without --endpoint.
type Config struct {
	Endpoint  string           `json:"endpoint,omitempty"`
	Endpoints map[string]Saved `json:"endpoints,omitempty"`
}

// ConfigPath is where cli.json lives: under os.UserConfigDir ($XDG_CONFIG_HOME or ~/.config).
func ConfigPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory for cli.json: %w", err)
	}
	return filepath.Join(dir, "cocoonbox", "cli.json"), nil
}

// LoadConfig reads the file at path; a missing file is an empty Config.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{Endpoints: map[string]Saved{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f := &Config{}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("%s is not valid cli.json (%w): fix or remove it, then log in again", path, err)
	}
	if f.Endpoints == nil {
		f.Endpoints = map[string]Saved{}
	}
	for ep, l := range f.Endpoints {
		switch l.Source {
		case SourceBrowser, SourcePaste, SourceApp:
		default:
			return nil, fmt.Errorf("%s: endpoint %s has source %q; want browser, paste or app", path, ep, l.Source)
		}
	}
	return f, nil
}

// Save writes f to path, mode 0600, its directory made 0700 when missing.
func (f *Config) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("make the directory of %s: %w", path, err)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode cli.json: %w", err)
	}
	if err := durable.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
