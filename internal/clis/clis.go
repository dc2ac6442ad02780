// Package clis finds the real npm programs that tests run (the claude and
// codex CLIs, the TypeScript MCP SDK): the npm installs tests/setup-host
// keeps in the cache.
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
	return cached(t, Env, "clis-2.1.197-0.171.0", "node_modules/.bin/claude", "the real claude and codex CLIs")
}

// MCPSDKEnv names the directory of the official TypeScript MCP SDK's npm
// install, when not the cache's.
const MCPSDKEnv = "COCOONBOX_MCP_SDK"

// MCPSDKVersion is the @modelcontextprotocol/sdk tests/setup-host installs.
const MCPSDKVersion = "1.32.2"

// MCPSDKDir is the TypeScript MCP SDK's npm install ($COCOONBOX_MCP_SDK,
// else $COCOONBOX_CACHE or /var/cache/cocoonbox, npm/mcp-sdk-VERSION);
// its node_modules holds @modelcontextprotocol/sdk. A missing one fails t.
func MCPSDKDir(t testing.TB) string {
	t.Helper()
	return cached(t, MCPSDKEnv, "mcp-sdk-"+MCPSDKVersion, "node_modules/@modelcontextprotocol/sdk/package.json",
		"the TypeScript MCP SDK "+MCPSDKVersion)
}

// cached is the npm install $env names, else the cache's npm/name; probe,
// a file under it, must exist, else t fails naming what.
func cached(t testing.TB, env, name, probe, what string) string {
	t.Helper()
	d := os.Getenv(env)
	if d == "" {
		cache := os.Getenv("COCOONBOX_CACHE")
		if cache == "" {
			cache = "/var/cache/cocoonbox"
		}
		d = filepath.Join(cache, "npm", name)
	}
	if _, err := os.Stat(filepath.Join(d, probe)); err != nil {
		t.Fatalf("%s: not at %s (make setup installs it): %v", what, d, err)
	}
	return d
}
