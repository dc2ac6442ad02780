// Package apitest runs the api as the product builds it (apiserver.New)
// for a test: on a fresh test database, served on a loopback listener,
// with a user signed in to the console. coder's coderdtest.New is the
// model: a test that needs the api never wires its services by hand, so a
// dependency added to apiserver.New is in every api test.
//
// The test package's TestMain must call dbtest.Main (the test cluster).
package apitest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apiserver"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire/testcert"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// Password is the password of every user apitest makes.
const Password = "correct horse"

// fastKDF is a password hash cost that keeps a sign-in well under a
// millisecond (users.DefaultKDF takes 64 MiB and tens of ms).
var fastKDF = users.KDF{Time: 1, MemoryKiB: 64, Threads: 1}

// API is one api for one test: apiserver.New's Server, serving at URL
// until the test ends (then Closed, its database dropped after).
type API struct {
	*apiserver.Server
	t testing.TB
	// URL is the api's origin (http://127.0.0.1:PORT, https with
	// WithTLS), its issuer and, with OAuth on, oauth.public_url.
	URL string
	// CAFile is the PEM file of the CA that signed the api's certificate
	// (WithTLS; "" without): what a client of the api must trust.
	CAFile string
	roots  *x509.CertPool
	// Config is the configuration New built the api from.
	Config config.Config
	// User is alice, a user (not an admin) with Password (zero with
	// WithoutUser); Session is a browser signed in to the console as her
	// (see SignIn), nil with WithoutSession or WithoutUser.
	User    users.User
	Session *Browser
	stop    func()
}

// Stop stops the api as its process would stop (its open calls end, its
// listener closes) before the test ends; the database stays, for an api
// of WithDatabaseOf and WithAddress to take over (a restart).
func (a *API) Stop() { a.stop() }

// New builds and serves an api for t. By default: OAuth for agents on
// (oauth.public_url is URL), GitHub sign-in off, no box supervisor (every
// Boxes call UNAVAILABLE), alice signed in, the console's sign-in limits at 100 per user and
// per address a minute, passwords hashed cheaply, nothing logged; opts
// change that. It fails t when the api does not start.
func New(t testing.TB, opts ...Option) *API {
	t.Helper()
	o := settings{}
	for _, opt := range opts {
		opt(&o)
	}
	dbURL := o.databaseURL
	if dbURL == "" {
		dbURL = dbtest.New(t, apiserver.Schemas...).URL
	}
	addr := o.address
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a := &API{t: t, URL: "http://" + ln.Addr().String()}
	if o.tls {
		ln = a.serveTLS(ln)
	}
	cfg := config.Default()
	cfg.Listen, cfg.StateDir = ln.Addr().String(), t.TempDir()
	cfg.Database.URL = dbURL
	cfg.Console.SignIn = config.SignIn{PerUser: 100, PerAddress: 100, Window: time.Minute}
	cfg.OAuth.PublicURL = a.URL // https with WithTLS: the one issuer
	var up connect.UpstreamConfig
	if o.connect != nil {
		cfg.Connect.PublicURL, up = a.URL, *o.connect
	}
	for _, f := range o.config {
		f(&cfg)
	}
	a.Config = cfg
	log := o.log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.supervisors == nil && !o.configured {
		o.supervisors = func(context.Context, *slog.Logger) (map[string]sandbox.Supervisor, func(), error) {
			return nil, nil, ErrNoSupervisor
		}
	}
	if o.getenv == nil { // the test's environment never switches GitHub sign-in on
		o.getenv = func(string) string { return "" }
	}
	kdf := fastKDF
	ctx, stop := context.WithCancel(context.Background())
	a.Server, err = apiserver.New(ctx, cfg, apiserver.Options{Log: log, Getenv: o.getenv, Now: o.now, KDF: &kdf, Supervisors: o.supervisors,
		Middleware: o.middleware, ConnectUpstream: up})
	if err != nil {
		stop()
		ln.Close()
		t.Fatalf("apitest: apiserver.New: %v", err)
	}
	served := make(chan struct{})
	go func() { a.Server.Serve(ctx, ln); close(served) }()
	a.stop = sync.OnceFunc(func() { stop(); <-served; a.Server.Close() })
	t.Cleanup(a.stop)

	if !o.noUser {
		a.User = a.AddUser("alice", false)
	}
	if !o.noSession {
		a.Session = a.SignIn("alice")
	}
	return a
}

// serveTLS makes a test CA and a certificate it signs for loopback, and
// answers ln wrapped in TLS with it; a.URL becomes https, a.CAFile the
// CA's PEM file.
func (a *API) serveTLS(ln net.Listener) net.Listener {
	a.t.Helper()
	files, err := testcert.Write(a.t.TempDir(), "api")
	if err != nil {
		a.t.Fatalf("apitest: the api's certificate: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		a.t.Fatalf("apitest: the api's certificate: %v", err)
	}
	pem, err := os.ReadFile(files.CA)
	if err != nil {
		a.t.Fatal(err)
	}
	a.roots = x509.NewCertPool()
	a.roots.AppendCertsFromPEM(pem)
	a.URL, a.CAFile = "https://"+ln.Addr().String(), files.CA
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
}
