package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/mcp/mcpurl"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// mountOAuth mounts OAuth for agents on srv when oauth.public_url is set
// (the discovery, the registration of clients in pool), and answers the
// control MCP's resource metadata URL for its 401s ("" with OAuth off).
//
// Contract: OAuth for agents (MCP authorization 2025-11-25).
func mountOAuth(srv *server.Server, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) string {
	if cfg.OAuth.PublicURL == "" {
		return ""
	}
	m := oauth.NewMetadata(cfg.OAuth.PublicURL)
	m.Mount(srv)
	clients := oauth.NewClients(pool, oauth.NewFetcher(oauth.FetcherConfig{}))
	oauth.NewRegistration(clients, log).Mount(srv)
	return m.ResourceMetadataURL(mcpurl.Path)
}
