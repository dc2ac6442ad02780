package apitest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/signup/githubtest"
)

// Option changes what New builds.
type Option func(*settings)

type settings struct {
	config      []func(*config.Config)
	noSession   bool
	noUser      bool
	tls         bool
	log         *slog.Logger
	now         func() time.Time
	getenv      func(string) string
	supervisors func(context.Context, *slog.Logger) (map[string]sandbox.Supervisor, func(), error)
	configured  bool // WithConfiguredSupervisor
	middleware  func(http.Handler) http.Handler
	connect     *connect.UpstreamConfig
	databaseURL string
	address     string
}

// ErrNoSupervisor is why an api of New without WithSupervisor has no boxes.
var ErrNoSupervisor = errors.New("apitest: no box supervisor (apitest.WithSupervisor)")

// WithConfig changes the configuration New builds the api from, after
// its defaults (the listener, the state directory, the database and
// oauth.public_url are set when f runs).
func WithConfig(f func(*config.Config)) Option {
	return func(s *settings) { s.config = append(s.config, f) }
}

// WithoutOAuth switches OAuth for agents off (oauth.public_url empty): no
// discovery, registration, grants or Agents page.
func WithoutOAuth() Option {
	return WithConfig(func(c *config.Config) { c.OAuth.PublicURL = "" })
}

// WithTLS serves the api over https with a test CA's certificate (for
// 127.0.0.1, ::1 and localhost; API.CAFile) and makes that https origin
// its one public origin, oauth.public_url (so the issuer, and every
// cookie Secure), as a deployment behind TLS is. API.URL is https, and
// the API's browsers trust the CA.
func WithTLS() Option { return func(s *settings) { s.tls = true } }

// WithoutSession leaves alice signed out (API.Session nil): no console
// session and no sign-in counted by the limits before the test's own.
func WithoutSession() Option { return func(s *settings) { s.noSession = true } }

// WithoutUser makes no user (API.User zero, API.Session nil): for a test
// that counts the accounts, the seats signup fills among them.
func WithoutUser() Option { return func(s *settings) { s.noUser, s.noSession = true, true } }

// WithLog logs the api's lines to log (default: nowhere).
func WithLog(log *slog.Logger) Option { return func(s *settings) { s.log = log } }

// WithClock is the api's clock of the console's sign-in limits, of OAuth
// for agents' codes and tokens and of scheduled wake
// (apiserver.Options.Now).
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// WithSupervisor gives the api the supervisor sup under the host name
// host (a fake one: sandbox.Supervisor's contract is the test's to keep);
// several add several hosts. Nothing closes them.
func WithSupervisor(host string, sup sandbox.Supervisor) Option {
	return func(s *settings) {
		prev := s.supervisors
		s.supervisors = func(ctx context.Context, log *slog.Logger) (map[string]sandbox.Supervisor, func(), error) {
			hosts := map[string]sandbox.Supervisor{}
			if prev != nil {
				var err error
				if hosts, _, err = prev(ctx, log); err != nil {
					return nil, nil, err
				}
			}
			hosts[host] = sup
			return hosts, func() {}, nil
		}
	}
}

// WithConfiguredSupervisor has the api start the supervisors its
// configuration names (sandbox.local, set with WithConfig: the local
// supervisor in process, as the binary starts it, with what apiserver
// wires into it), in place of none. The api closes it.
func WithConfiguredSupervisor() Option { return func(s *settings) { s.configured = true } }

// WithDatabaseOf serves other's database, as a replica of the api does
// (several apis on one PostgreSQL): no database of its own and no user
// made (API.User zero, API.Session nil; other's users are its). Nothing else is shared:
// give the replica the same supervisor (WithSupervisor) and clock
// (WithClock) as other when it must drive the same boxes on one time.
func WithDatabaseOf(other *API) Option {
	return func(s *settings) {
		s.databaseURL, s.noUser, s.noSession = other.Config.Database.URL, true, true
	}
}

// WithAddress serves the api on addr (host:port) rather than a free
// port: with WithDatabaseOf, the api that comes back after another's
// Stop, as a restart, at the origin its pages were loaded from.
func WithAddress(addr string) Option { return func(s *settings) { s.address = addr } }

// WithGW points the api at the gw stand-in g (gw.url, and its master key
// in a file under the state directory).
func WithGW(g *gwtest.Server) Option {
	return WithConfig(func(c *config.Config) {
		path := filepath.Join(c.StateDir, "gw-master.key")
		if err := os.WriteFile(path, []byte(g.MasterKey+"\n"), 0o600); err != nil {
			panic(err) // the test's own temporary directory
		}
		c.GW.URL, c.GW.MasterKeyFile = g.URL, path
	})
}

// WithGitHub switches GitHub sign-in on against the stand-in gh: the
// login OAuth App's variables are gh's client, signup.github's keys its
// URLs and certificate.
func WithGitHub(gh *githubtest.Server) Option {
	return func(s *settings) {
		env := map[string]string{"LOGIN_GITHUB_CLIENT_ID": gh.ClientID, "LOGIN_GITHUB_CLIENT_SECRET": gh.ClientSecret}
		s.getenv = func(k string) string { return env[k] }
		s.config = append(s.config, func(c *config.Config) {
			c.Signup.GitHub = config.SignupGitHub{WebURL: gh.WebURL, APIURL: gh.APIURL, CAFile: gh.CAFile}
		})
	}
}

// WithMiddleware has apiserver.New wrap every route of the api in mw
// (apiserver.Options.Middleware): what a middleware New adds sees, a test
// sees through mw.
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *settings) { s.middleware = mw }
}

// WithConnect switches Connect on (connect.public_url is URL) with up as
// its outbound settings: a test's server under a public name
// (connect.UpstreamConfig.Resolve) and its CA.
func WithConnect(up connect.UpstreamConfig) Option {
	return func(s *settings) { s.connect = &up }
}
