package main

import (
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcpurl"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// mountOAuth mounts OAuth for agents on srv when oauth.public_url is set,
// and answers the control MCP's resource metadata URL for its 401s (""
// with OAuth off).
//
// Contract: OAuth for agents (MCP authorization 2025-11-25).
func mountOAuth(srv *server.Server, cfg config.Config) string {
	if cfg.OAuth.PublicURL == "" {
		return ""
	}
	m := oauth.NewMetadata(cfg.OAuth.PublicURL)
	m.Mount(srv)
	return m.ResourceMetadataURL(mcpurl.Path)
}
