// Command cocoonbox-sandboxd is the box supervisor as a daemon: the local
// supervisor (api/sandbox/local) served over the wire protocol
// (cocoonbox.sandbox.v1.Sandbox, connect-go over cleartext HTTP/2), so one
// api drives the boxes of several hosts (Contract: Boxes (api) ↔ sandboxd).
//
// It listens on a unix socket (root only) by default; on TCP every call
// must carry the bearer token from --token-file. Exit codes: 0 stopped by
// SIGTERM or SIGINT, 1 failed, 2 bad usage.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox/local"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
)

// Version is stamped by the Makefile with the source revision.
var Version = "dev"

const defaultSocket = "/run/cocoonbox-sandboxd/sandboxd.sock"

func main() {
	err := run(os.Args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "cocoonbox-sandboxd:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "cocoonbox-sandboxd:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

type options struct {
	listen, tokenFile, stateDir, images, egressHosts string
	bridge, gateway                                  string
	pingAfter, idle                                  time.Duration
}

func run(args []string) error {
	if len(args) == 1 && args[0] == "version" {
		fmt.Println(Version)
		return nil
	}
	var o options
	fs := flag.NewFlagSet("cocoonbox-sandboxd", flag.ContinueOnError)
	fs.Usage = func() {
		// --help is asked for: the usage goes to stdout (a bad flag's to stderr).
		fmt.Fprintln(fs.Output(), "usage: cocoonbox-sandboxd [--listen unix:PATH|HOST:PORT] [--token-file FILE] [--state-dir DIR] [--images DIR] [--bridge NAME] [--gateway ADDR/BITS] [--egress-hosts H,...]")
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(os.Stdout)
		}
	}
	fs.StringVar(&o.listen, "listen", "unix:"+defaultSocket, "unix:PATH (root only) or HOST:PORT (needs --token-file)")
	fs.StringVar(&o.tokenFile, "token-file", "", "a file whose first line is the bearer token every call must carry")
	fs.StringVar(&o.stateDir, "state-dir", "/var/lib/cocoonbox-sandboxd", "the machines' disks and the saves")
	fs.StringVar(&o.images, "images", "/var/lib/cocoonbox-sandboxd/images", "the directory of image roots cbdesk-vN-TIER")
	fs.StringVar(&o.egressHosts, "egress-hosts", "", "comma-separated hosts the egress proxy alone reaches (empty: every public host)")
	fs.StringVar(&o.bridge, "bridge", local.DefaultNetwork().Bridge, "the box network's host bridge")
	fs.StringVar(&o.gateway, "gateway", local.DefaultNetwork().Gateway.String(), "the bridge's address and the boxes' prefix")
	fs.DurationVar(&o.pingAfter, "ping-after", 15*time.Second, "ping an HTTP/2 connection after this long without a frame")
	fs.DurationVar(&o.idle, "idle-timeout", 5*time.Minute, "close a connection with no open call after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return serve(ctx, o)
}

func serve(ctx context.Context, o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	token, err := readToken(o.tokenFile)
	if err != nil {
		return err
	}
	ln, err := listen(o.listen, token != "")
	if err != nil {
		return err
	}
	defer ln.Close()
	var hosts []string
	if o.egressHosts != "" {
		hosts = strings.Split(o.egressHosts, ",")
	}
	network := local.DefaultNetwork()
	network.Bridge = o.bridge
	if network.Gateway, err = netip.ParsePrefix(o.gateway); err != nil || !network.Gateway.Addr().Is4() {
		return fmt.Errorf("%w: --gateway %q is not an IPv4 address with its prefix (e.g. 10.203.0.1/16)", errUsage, o.gateway)
	}
	sup, err := local.New(ctx, local.Config{StateDir: o.stateDir, Images: o.images, Network: network, EgressHosts: hosts, Log: log})
	if err != nil {
		return err
	}
	defer sup.Close()
	mux := http.NewServeMux()
	path, h := wire.NewHandler(sup)
	mux.Handle(path, requireToken(token, h))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	// No ReadTimeout or WriteTimeout: an exec or relay stream lives as long
	// as its command; pings find a dead peer instead.
	srv := &http.Server{Handler: mux, Protocols: &protocols, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: o.idle,
		HTTP2: &http.HTTP2Config{SendPingTimeout: o.pingAfter, PingTimeout: o.pingAfter,
			MaxReceiveBufferPerStream: wire.Window, MaxReceiveBufferPerConnection: wire.Window},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", "listen", o.listen, "state_dir", o.stateDir, "images", o.images, "proxy", sup.ProxyURL())
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

// listen opens unix:PATH (made 0600, its directory 0700) or a TCP address,
// which is refused without a token.
func listen(addr string, haveToken bool) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
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
	if !haveToken {
		return nil, fmt.Errorf("%w: --listen %s is TCP: give --token-file, or listen on unix:PATH", errUsage, addr)
	}
	return net.Listen("tcp", addr)
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
