// Command cocoonbox-sandboxd is the box supervisor as a daemon: the local
// supervisor (api/sandbox/local) served over the wire protocol
// (cocoonbox.sandbox.v1.Sandbox, connect-go over HTTP/2), so one api
// drives the boxes of several hosts (Contract: Boxes (api) ↔ sandboxd).
//
// It listens on a unix socket (root only, cleartext) by default; on TCP
// every call must carry the bearer token from --token-file, and the
// connection is TLS (--tls-cert, --tls-key) unless the address is
// loopback. Exit codes: 0 stopped by SIGTERM, 1 failed, 2 bad usage, 130
// Ctrl-C (internal/command).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

const defaultSocket = "/run/cocoonbox-sandboxd/sandboxd.sock"

func main() {
	os.Exit(command.Execute(newRoot()))
}

// run runs the binary on args as main does, without the exit, its
// output (help, version) on stdout.
func run(args []string, stdout io.Writer) error {
	return command.Run(context.Background(), newRoot(), args, os.Stdin, stdout, os.Stderr)
}

// run runs the binary on args as main does, without the exit.
// errUsage marks an error as bad usage (exit 2).
var errUsage = errors.New("usage")

type options struct {
	listen, tokenFile, stateDir, images, egressHosts, egressAdmit, gwURL string
	tlsCert, tlsKey                                                      string
	bridge, gateway                                                      string
	pingAfter, pingTimeout, idle                                         time.Duration
	spares                                                               int
}

// newRoot is the daemon as its command: SIGTERM stops it (exit 0),
// Ctrl-C too (exit 130).
func newRoot() *cobra.Command {
	var o options
	root := &cobra.Command{
		Use:   "cocoonbox-sandboxd",
		Short: "The box supervisor as a daemon, driven by the api over the wire protocol",
		Long: `cocoonbox-sandboxd is the box supervisor as a daemon: the local supervisor
served over the wire protocol (cocoonbox.sandbox.v1.Sandbox, connect-go over
HTTP/2), so one api drives the boxes of several hosts.

It listens on a unix socket (root only, cleartext) with --listen unix:PATH; on
TCP every call must carry the bearer token from --token-file, and the
connection is TLS (--tls-cert, --tls-key) unless the address is loopback. It
refuses to start unless --listen or --state-dir is named.

Exit codes: 0 stopped by SIGTERM, 1 failed, 2 bad usage, 130 interrupted
(Ctrl-C).`,
		Example: `  cocoonbox-sandboxd --state-dir /var/lib/cocoonbox-sandboxd
  cocoonbox-sandboxd --listen 10.0.0.2:7443 --token-file /etc/cocoonbox/sandboxd.token --tls-cert cert.pem --tls-key key.pem`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{command.CleanStop: "SIGTERM"},
		RunE: func(cmd *cobra.Command, args []string) error {
			err := start(cmd, o)
			if errors.Is(err, errUsage) {
				return command.UsageError{Msg: err.Error(), Err: err}
			}
			return err
		},
	}
	fs := root.Flags()
	fs.StringVar(&o.listen, "listen", "unix:"+defaultSocket, "unix:PATH (root only) or HOST:PORT (needs --token-file, and --tls-cert unless HOST is loopback)")
	fs.StringVar(&o.tokenFile, "token-file", "", "a file whose first line is the bearer token every call must carry")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve TLS with on TCP; the api's sandbox.ca_file must verify it")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.stateDir, "state-dir", "/var/lib/cocoonbox-sandboxd", "the machines' disks and the saves")
	fs.StringVar(&o.images, "images", "/var/lib/cocoonbox-sandboxd/images", "the directory of image roots cbdesk-vN-TIER")
	fs.StringVar(&o.egressHosts, "egress-hosts", "", "comma-separated hosts the egress proxy alone reaches (empty: every public host)")
	fs.StringVar(&o.gwURL, "gw-url", "", "gw's origin: the gw door on the gateway's port 18090 forwards the boxes' model calls there with their owner's key (empty: no door)")
	fs.StringVar(&o.egressAdmit, "egress-admit", "", "comma-separated networks (CIDR) the egress proxy reaches although not public, e.g. an internal mirror's 10.20.0.0/16 (never loopback, link-local, multicast; never this host's own addresses)")
	fs.StringVar(&o.bridge, "bridge", local.DefaultNetwork().Bridge, "the box network's host bridge")
	fs.StringVar(&o.gateway, "gateway", local.DefaultNetwork().Gateway.String(), "the bridge's address and the boxes' prefix")
	fs.IntVar(&o.spares, "spares", 1, fmt.Sprintf("booted machines of each tier's newest image kept for a create to take over, 0 to %d (docs/box-lifecycle.md, Spares)", local.MaxSpares))
	fs.DurationVar(&o.pingAfter, "ping-after", 15*time.Second, "ping an HTTP/2 connection after this long without a frame")
	fs.DurationVar(&o.pingTimeout, "ping-timeout", 0, "close a connection whose ping has no answer after this long (0: --ping-after)")
	fs.DurationVar(&o.idle, "idle-timeout", 5*time.Minute, "close a connection with no open call after this long")
	return command.New(root)
}

// start checks o and serves until the command's context ends.
func start(cmd *cobra.Command, o options) error {
	if o.spares < 0 || o.spares > local.MaxSpares {
		return fmt.Errorf("%w: --spares %d is not 0 to %d", errUsage, o.spares, local.MaxSpares)
	}
	// A bare run would start a daemon on the defaults, writing
	// /var/lib/cocoonbox-sandboxd with a CA key (issue 45): a deployment
	// names where it listens or keeps its state, as the packaged unit does.
	if !cmd.Flags().Changed("listen") && !cmd.Flags().Changed("state-dir") {
		return fmt.Errorf("%w: name --listen or --state-dir: without either it would start a supervisor on %s writing %s (a CA key included); units/host/cocoonbox-sandboxd.service runs it with --state-dir /var/lib/cocoonbox-sandboxd", errUsage, o.listen, o.stateDir)
	}
	if o.pingTimeout == 0 {
		o.pingTimeout = o.pingAfter
	}
	return serve(cmd.Context(), o)
}

func serve(ctx context.Context, o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ep, err := openEndpoint(o)
	if err != nil {
		return err
	}
	defer ep.ln.Close()
	var hosts []string
	if o.egressHosts != "" {
		hosts = strings.Split(o.egressHosts, ",")
	}
	var admit []netip.Prefix
	if o.egressAdmit != "" {
		if admit, err = egress.ParseAdmit(strings.Split(o.egressAdmit, ",")); err != nil {
			return fmt.Errorf("%w: --egress-admit: %v", errUsage, err)
		}
	}
	network := local.DefaultNetwork()
	network.Bridge = o.bridge
	if network.Gateway, err = netip.ParsePrefix(o.gateway); err != nil || !network.Gateway.Addr().Is4() {
		return fmt.Errorf("%w: --gateway %q is not an IPv4 address with its prefix (e.g. 10.203.0.1/16)", errUsage, o.gateway)
	}
	sup, err := local.New(ctx, local.Config{StateDir: o.stateDir, Images: o.images, Network: network, EgressHosts: hosts, EgressAdmit: admit, GWURL: o.gwURL, Log: log, Spares: o.spares})
	if err != nil {
		return err
	}
	defer sup.Close()
	srv := newServer(o, ep, sup, log)
	served := make(chan error, 1)
	go func() { served <- ep.serve(srv) }()
	log.Info("serving", "listen", o.listen, "tls", ep.tls != nil, "state_dir", o.stateDir, "images", o.images, "proxy", sup.ProxyURL())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("stopping: open calls end, booted machines stop, disks stay")
	grace, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(grace)
	return nil
}

// newServer is the HTTP/2 server of the wire protocol for sup, behind the
// endpoint's token.
func newServer(o options, ep *endpoint, sup sandbox.Supervisor, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	path, h := wire.NewHandler(sup)
	mux.Handle(path, requireToken(ep.token, h))
	var protocols http.Protocols
	if ep.tls != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	// No ReadTimeout or WriteTimeout: an exec or relay stream lives as long
	// as its command; pings find a dead peer instead.
	return &http.Server{Handler: mux, Protocols: &protocols, TLSConfig: ep.tls, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.idle,
		HTTP2: &http.HTTP2Config{SendPingTimeout: o.pingAfter, PingTimeout: o.pingTimeout,
			MaxReceiveBufferPerStream: wire.Window, MaxReceiveBufferPerConnection: wire.Window},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// endpoint is where the daemon listens and what a call must bring: the
// listener, its TLS configuration (nil: cleartext) and the bearer token
// (empty on a unix socket without --token-file).
type endpoint struct {
	ln    net.Listener
	tls   *tls.Config
	token string
}

// serve serves srv on the endpoint, over TLS when it has a certificate.
func (ep *endpoint) serve(srv *http.Server) error {
	if ep.tls != nil {
		return srv.ServeTLS(ep.ln, "", "")
	}
	return srv.Serve(ep.ln)
}

// openEndpoint reads the token and the certificate and listens, by the
// rules of --listen: a unix socket is root's (0600, its directory 0700)
// and cleartext; TCP needs the token, and TLS unless the address is
// loopback, because the token (root over every box of this host) and
// every exec's input and output would otherwise cross the network
// readable.
func openEndpoint(o options) (*endpoint, error) {
	token, err := readToken(o.tokenFile)
	if err != nil {
		return nil, err
	}
	cfg, err := serverTLS(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, err
	}
	ep := &endpoint{tls: cfg, token: token}
	if p, ok := strings.CutPrefix(o.listen, "unix:"); ok {
		if cfg != nil {
			return nil, fmt.Errorf("%w: --tls-cert is for a TCP --listen; unix:%s is cleartext, root's alone", errUsage, p)
		}
		ep.ln, err = listenUnix(p)
		return ep, err
	}
	if token == "" {
		return nil, fmt.Errorf("%w: --listen %s is TCP: give --token-file, or listen on unix:PATH", errUsage, o.listen)
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return nil, fmt.Errorf("%w: --listen %q is neither unix:PATH nor HOST:PORT", errUsage, o.listen)
	}
	if cfg == nil && !sandbox.CleartextHost(host) {
		return nil, fmt.Errorf("%w: --listen %s is cleartext TCP on a non-loopback address (the token and every exec's input and output would cross the network readable): give --tls-cert and --tls-key, or listen on loopback or unix:PATH", errUsage, o.listen)
	}
	if ep.ln, err = net.Listen("tcp", o.listen); err != nil {
		return nil, err
	}
	return ep, nil
}

// serverTLS loads --tls-cert and --tls-key (both or neither; nil for
// neither): TLS 1.3, the api's client being ours.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: --tls-cert and --tls-key go together", errUsage)
	}
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	token, _, _ := strings.Cut(string(data), "\n")
	if token = strings.TrimSpace(token); len(token) < 32 {
		return "", fmt.Errorf("token file %s: the token must be at least 32 characters", path)
	}
	return token, nil
}

// listenUnix opens a unix socket made 0600, its directory 0700.
func listenUnix(p string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(p, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// requireToken refuses a call without the bearer token (compared in
// constant time over its SHA-256) when one is set.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "16")
			w.Header().Set("Grpc-Message", "missing or wrong bearer token")
			w.WriteHeader(http.StatusOK)
			return
		}
		next.ServeHTTP(w, r)
	})
}
