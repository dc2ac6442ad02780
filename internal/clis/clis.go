// Package clis finds the real claude and codex CLIs that tests run: the
// npm install tests/setup-host keeps in the cache.
package clis

import (
	"os"
	"path/filepath"
	"testing"
)

// Env names the directory of the CLIs' npm install, when not the cache's.
const Env = "COCOONBOX_OFFLOAD_CLIS"

// Dir is the CLIs' npm install ($COCOONBOX_OFFLOAD_CLIS, else
// $COCOONBOX_CACHE or /var/cache/cocoonbox, npm/clis-VERSIONS); its
// node_modules/.bin holds claude and codex. A missing one fails t.
func Dir(t testing.TB) string {
	t.Helper()
	d := os.Getenv(Env)
	if d == "" {
		cache := os.Getenv("COCOONBOX_CACHE")
		if cache == "" {
			cache = "/var/cache/cocoonbox"
		}
		d = filepath.Join(cache, "npm/clis-2.1.197-0.171.0")
	}
	if _, err := os.Stat(filepath.Join(d, "node_modules/.bin/claude")); err != nil {
		t.Fatalf("the real claude and codex CLIs are not at %s (make setup installs them): %v", d, err)
	}
	return d
}
