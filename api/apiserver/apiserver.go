// Package apiserver builds the api: the one composition root of its
// services (users, tokens, the console, sign-in and devices, OAuth for
// agents, boxes, sessions, keys, the control MCP, Connect, signup and
// GitHub sign-in) on one server.Server, for cocoonbox-api serve and for every test
// that needs the api as the product runs it (package apitest). Nothing
// else knows about all of them.
package apiserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/state"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/store"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/usage"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/cocoonbox/cocoonbox/api/wake"
)

// Options are what New takes beside the configuration. The zero Options
// are what cocoonbox-api serve uses; the rest are for tests.
type Options struct {
	// Log is where the api logs (nil: nowhere).
	Log *slog.Logger
	// Getenv reads the login OAuth App's variables (nil: os.Getenv).
	Getenv func(string) string
	// Now is the clock of the console's sign-in limits, of OAuth for
	// agents' codes and tokens and of scheduled wake (when a schedule is
	// due, whether its SleepAt is ahead) (nil: time.Now).
	Now func() time.Time
	// KDF, when set, is the users store's password hashing cost in place
	// of users.DefaultKDF (a test's cheap one).
	KDF *users.KDF
	// Supervisors, when set, answers the box supervisors by host name, and
	// a func that closes them, in place of sandbox.hosts' daemons or the
	// local supervisor; an error leaves the api without boxes (every Boxes
	// call UNAVAILABLE with it), as a supervisor that does not start.
	Supervisors func(ctx context.Context, log *slog.Logger) (map[string]sandbox.Supervisor, func(), error)
	// Middleware, when set, wraps every route of the api, outside every
	// check New adds (inside the request log): apitest's proof that every
	// api test serves New's whole chain (apitest.WithMiddleware).
	Middleware func(http.Handler) http.Handler
	// ConnectUpstream is Connect's outbound settings (a test's name sent
	// to its server on loopback, its CA); the zero value is production's.
	ConnectUpstream connect.UpstreamConfig
}

// Server is the api as New built it: its handler, and the services a test
// reaches past HTTP (the database, the users and tokens, the console).
// Serve it on a listener, or mount Handler on another server (httptest);
// Close it once.
type Server struct {
	// DB is the api's database, opened and migrated by New.
	DB *database.DB
	// Users and Tokens are the account and personal-token stores the
	// console uses; Index is the live token index (started).
	Users  *users.Store
	Tokens *tokens.Store
	Index  *tokens.Index
	// Console is the console (/cb/) with its sections.
	Console *console.Console
	// Signup is signup's queue, admission and invites (running).
	Signup *signup.Signup
	// Grants are OAuth for agents' grants (started); nil with OAuth off
	// (oauth.public_url empty).
	Grants *oauth.Grants
	// Connect is Connect's broker; nil with Connect off
	// (connect.public_url empty).
	Connect *connect.Broker
	// BoxDoorAddr is where the Connect box door listens (connect.box_listen;
	// nil when it is off or could not listen).
	BoxDoorAddr net.Addr
	// Boxes is the Boxes service's handler: an Unavailable one without a
	// supervisor.
	Boxes *boxes.Handler
	// State is the state store (state.store: embedded or s3), and
	// StateKeys a user's keys of it (the vault's state key), with which a
	// test writes a snapshot the Boxes service reads.
	State     store.Store
	StateKeys func(ctx context.Context, userID string) (*objects.Keys, error)
	// StateGC applies state.retention and deletes unreferenced chunks
	// (running every state.gc_every and after each box save); a test
	// reads its Totals.
	StateGC *state.Collector
	// Usage is model usage (the users' gw keys, caps and figures); nil
	// without gw.url.
	Usage *usage.Service
	// Wake is the scheduler of scheduled wakes, running every wakeEvery;
	// nil without a supervisor. A test reads its Passes.
	Wake *wake.Scheduler

	cfg     config.Config
	log     *slog.Logger
	srv     *server.Server
	start   time.Time
	cancel  context.CancelFunc
	closers []func()
}

// New opens and migrates cfg's database (the embedded cluster without
// database.url) and builds the api on it: every service mounted on one
// server, the token index, the grants, signup's admission and the vault's
// audit sweeper and the state store's sweeper of deleted users started.
// Their background work runs until Close (or ctx's
// end). An error comes from the database, the vault's master key, OAuth's
// metadata fetcher or grants, the GitHub App's settings, the token index
// or the state store; what New started is stopped before it answers one. A supervisor
// that does not start is no error: the api serves the rest and logs why
// (Boxes answers UNAVAILABLE).
func New(ctx context.Context, cfg config.Config, opts Options) (_ *Server, err error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{cfg: cfg, log: log, start: time.Now(), cancel: cancel}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	db, err := OpenDB(ctx, cfg, log, false)
	if err != nil {
		return nil, err
	}
	s.DB = db
	s.closing(func() { db.Close(context.Background()) })
	var pushKeys keysPush
	keys, err := startVault(ctx, cfg, db, pushKeys.push, log)
	if err != nil {
		return nil, err
	}
	models, err := startUsage(cfg, db, keys, log)
	if err != nil {
		return nil, err
	}

	// The token index keeps every live token of the database in memory and
	// follows every api's changes (NOTIFY cocoonbox_users).
	index := tokens.NewIndex(db.Pool, db.URL, log)

	srv := server.New(log, func(ctx context.Context) error { return db.Pool.Ping(ctx) })
	if opts.Middleware != nil {
		srv.Wrap(opts.Middleware) // first: around what the mounts Wrap
	}
	srv.Wrap(pageHeaders)
	srv.SetTimeouts(server.Timeouts{ReadHeader: cfg.HTTP.ReadHeaderTimeout, Read: cfg.HTTP.ReadTimeout, Idle: cfg.HTTP.IdleTimeout,
		PingAfter: cfg.HTTP.PingAfter, PingTimeout: cfg.HTTP.PingTimeout})
	srv.SetConnLimit(cfg.HTTP.MaxConnsPerAddress, cfg.TrustedPrefixes())
	if s.State, err = openState(ctx, srv, cfg, log); err != nil {
		return nil, err
	}
	// A deleted user's objects leave the store as their machines leave
	// their hosts: at boxes.recover_every.
	go state.NewSweeper(db.Pool, s.State, log).Run(ctx, cfg.Boxes.RecoverEvery)
	userStore := users.NewStore(db.Pool)
	if opts.KDF != nil {
		userStore.KDF = *opts.KDF
	}
	tokenStore := tokens.NewStore(db.Pool, index)
	con := console.New(console.Deps{Pool: db.Pool, Users: userStore, Tokens: tokenStore,
		Secure: cfg.Secure(), Log: log, Now: opts.Now,
		SignIn: console.SignInLimits{PerUser: cfg.Console.SignIn.PerUser, PerAddress: cfg.Console.SignIn.PerAddress,
			Window: cfg.Console.SignIn.Window, TrustedProxies: cfg.TrustedPrefixes()}})
	con.Mount(srv)
	mountVersion(srv)
	agents, stopOAuth, err := mountOAuth(ctx, srv, cfg, db, con, opts.Now, log)
	if err != nil {
		return nil, err
	}
	s.closing(stopOAuth)
	viewers := &shares.Viewers{} // the open viewers of shares: sign out everywhere ends them
	mountSignIn(srv, db.Pool, cfg.Issuer(), index, tokenStore, con, agents, viewers, log)
	scheduleStore := wake.NewStore(db.Pool, opts.Now)
	schedules := wake.NewService(scheduleStore, tokens.UserID)
	boxSaves := boxState(s.State, keys)
	s.StateKeys = boxSaves.Keys
	s.StateGC = startStateGC(ctx, cfg, db, s.State, boxSaves, opts.Now, log)
	boxDoor := &lateHandler{} // the Connect box door, once its broker is made
	bh, scheduler, stopBoxes := mountBoxes(ctx, srv, cfg, opts.Supervisors, db, index, keys.Entries, boxSaves, models, scheduleStore, schedules,
		boxDoor.doors(cfg.Connect), log)
	s.closing(stopBoxes)
	screens := mountSession(srv, bh, index, con, cfg.HTTP.ScreenStall, log)
	followed, err := mountShares(ctx, srv, db, viewers, screens, bh, index, con, cfg.Issuer(), opts.Now, log)
	if err != nil {
		return nil, err
	}
	s.closing(followed) // Close cancels ctx first
	mountKeys(srv, keys, pushKeys.to(bh), index, con, log)
	mountControlMCP(srv, bh, schedules, index, agents, log, cfg.Issuer())
	mountBoxesConsole(srv, bh, con, log)
	mountWakeConsole(srv, scheduleStore, con, log)
	mountUsageConsole(srv, models, con, log)
	if _, err := bh.Service(); err == nil { // else the home page says boxes are not available
		con.SetBoxes(homeBoxes(bh))
	}
	up := opts.ConnectUpstream
	if up.Now == nil {
		up.Now = opts.Now
	}
	broker, stopConnect, err := mountConnect(srv, cfg, up, db, keys, index, con, log)
	if err != nil {
		return nil, err
	}
	s.closing(stopConnect)
	s.Connect = broker
	if s.BoxDoorAddr, err = serveBoxDoor(broker, bh, cfg.Connect, boxDoor, log); err != nil {
		return nil, err
	}
	s.closing(boxDoor.stop)
	sg := mountSignup(ctx, srv, cfg, db.Pool, userStore, con, index, models, log)
	revokeOnChange(ctx, models, index, pushKeys.push, log)
	if err := mountGitHub(srv, cfg, getenv, db.Pool, con, sg, log); err != nil {
		return nil, err
	}
	// Started once everything that follows its changes is mounted (OnChange).
	if err := index.Start(ctx); err != nil {
		return nil, err
	}
	s.closing(index.Stop)

	s.srv, s.Users, s.Tokens, s.Index, s.Console, s.Signup, s.Boxes, s.Usage, s.Wake = srv, userStore, tokenStore, index, con, sg, bh, models, scheduler
	if agents != nil {
		s.Grants = agents.grants
	}
	return s, nil
}

// closing adds f to what Close runs, after what was added later.
func (s *Server) closing(f func()) { s.closers = append(s.closers, f) }

// Handler is the api's whole handler (every route, the request log, the
// invite-scoped token check), for a listener of the caller's (httptest).
func (s *Server) Handler() http.Handler { return s.srv.Handler() }

// Serve serves the api on ln until ctx ends (then it shuts down the
// server, see server.Server.Serve); it answers that Serve's error. It does
// not Close s.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.log.Info("serving", "addr", ln.Addr().String(), "issuer", s.cfg.Issuer(), "console", s.cfg.Issuer()+"/cb/", "state_dir", s.cfg.StateDir,
		"database", map[bool]string{true: "embedded", false: "database.url"}[s.cfg.Database.URL == ""], "ready_in", time.Since(s.start).Round(time.Millisecond),
		"next", s.nextStep(ctx))
	return s.srv.Serve(ctx, ln)
}

// nextStep is what the start-up log tells the operator to do next (issue
// 45): make the first user while there is none, else sign in.
func (s *Server) nextStep(ctx context.Context) string {
	if list, err := s.Users.List(ctx); err != nil || len(list) > 0 {
		return "sign in at the console"
	}
	where := "--state-dir " + s.cfg.StateDir
	if s.cfg.Database.URL != "" {
		where = "with this api's --config"
	}
	return "no user yet: cocoonbox-api users add NAME --admin " + where + " (the password on stdin, or asked at a terminal)"
}

// Close ends New's background work and stops what it started, the last
// started first: the token index, the box service and its supervisors,
// OAuth's grants and fetcher, then the database (the embedded cluster
// with it). Call it once, after Serve returned.
func (s *Server) Close() {
	s.cancel()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}
