package apiserver

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	useragents "github.com/cocoonbox/cocoonbox/api/agents"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// TestCIMDRootsEnv names a PEM file of roots the Client ID Metadata
// Document fetcher trusts, and lets it dial loopback: for the built api's
// tests, whose documents are served by an httptest TLS server on
// 127.0.0.1. Never set in production (docs/oauth.md says so).
const TestCIMDRootsEnv = "COCOONBOX_TEST_OAUTH_CIMD_ROOTS"

// agentsOAuth is OAuth for agents as mounted: what the sign-in shares
// its endpoints with, what the control MCP checks cba_ tokens with, and
// the control MCP's resource metadata URL for its 401s. nil with OAuth
// off.
type agentsOAuth struct {
	agents *oauth.Agents
	grants *oauth.Grants
	prm    string
	// caps keeps an agent's control MCP calls to its grant's boxes and caps.
	caps *useragents.Caps
}

// mountOAuth mounts OAuth for agents on srv when oauth.public_url is set
// (the discovery, the registration of clients in db, the grants' index,
// started here and stopped by the function answered) and answers nil
// when it is not.
//
// Contract: OAuth for agents (MCP authorization 2025-11-25).
func mountOAuth(ctx context.Context, srv *server.Server, cfg config.Config, db *database.DB, con *console.Console, now func() time.Time, log *slog.Logger) (*agentsOAuth, func(), error) {
	if cfg.OAuth.PublicURL == "" {
		return nil, func() {}, nil
	}
	m := oauth.NewMetadata(cfg.Issuer())
	m.Mount(srv)
	srv.Wrap(oauth.CleanWellKnown)
	fc := oauth.FetcherConfig{}
	if path := os.Getenv(TestCIMDRootsEnv); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", TestCIMDRootsEnv, err)
		}
		fc.TestRoots = x509.NewCertPool()
		if !fc.TestRoots.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: %s holds no PEM certificate", TestCIMDRootsEnv, path)
		}
		fc.TestAllowLoopback = true
		log.Warn("oauth: metadata documents are fetched from loopback with test roots (" + TestCIMDRootsEnv + "): never in production")
	}
	fetcher, err := oauth.NewFetcher(fc)
	if err != nil {
		return nil, nil, err
	}
	clients := oauth.NewClients(db.Pool, fetcher)
	oauth.NewRegistration(clients, log).Mount(srv)
	grants := oauth.NewGrants(db.Pool, db.URL, log)
	if now != nil {
		grants.Now = now
	}
	if err := grants.Start(ctx); err != nil {
		fetcher.Close()
		return nil, nil, err
	}
	// The Agents page: the user's grants, seen, revoked; its notice on
	// the console's home page while a grant is unseen.
	pages := useragents.NewConsole(useragents.NewStore(db.Pool, grants), con.UserID, log)
	pages.Mount(srv)
	con.AddSection(console.Section{Title: "Agents", Path: "/cb/agents", Notice: pages.Notice,
		Blurb: "The agents (claude, codex, any MCP client) you allowed to create and run boxes; revoke one.", Page: &useragents.Page})
	session := func(r *http.Request) (oauth.User, bool) {
		u, ok := con.Session(r)
		return oauth.User{ID: u.ID, Name: u.Name}, ok
	}
	return &agentsOAuth{agents: oauth.NewAgents(cfg.Issuer(), clients, grants, session, log), grants: grants,
		prm: m.ResourceMetadataURL(client.MCPPath), caps: useragents.NewCaps(db.Pool)}, func() { grants.Stop(); fetcher.Close() }, nil
}
