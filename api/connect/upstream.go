package connect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
)

// CallTimeout bounds one call to a connector's server, connect included.
const CallTimeout = 60 * time.Second

// UpstreamConfig configures the broker's outbound calls. Production sets
// none of it.
type UpstreamConfig struct {
	// Resolve sends a host name to an address, admitted for that name
	// alone (egress.DialerConfig.Resolve): a test's server on loopback
	// under a public name. The check stays on for every other name and
	// for any address given as a URL's host.
	Resolve map[string]netip.Addr
	// Roots replaces the system's roots (a test server's CA).
	Roots *x509.CertPool
	// Now is the clock a grant's expiry is read by (time.Now when nil;
	// apiserver.Options.Now).
	Now func() time.Time
}

// upstream dials the connectors' servers through an egress.Dialer: public
// addresses only, none of the host's own (Contract: Connect, Outbound).
type upstream struct {
	dialer *egress.Dialer
	tr     *http.Transport
}

func newUpstream(cfg UpstreamConfig) (*upstream, error) {
	d, err := egress.NewDialer(egress.DialerConfig{Resolve: cfg.Resolve, Timeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("connect: outbound dialer: %w", err)
	}
	return &upstream{dialer: d, tr: &http.Transport{
		Proxy:                  nil, // the address checked is the one dialled
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.Roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  CallTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		ForceAttemptHTTP2:      true,
	}}, nil
}

func (u *upstream) close() {
	u.tr.CloseIdleConnections()
	u.dialer.Close()
}

// withHeader sends one header on every request: the grant's key. It
// notes a 401 answer (refused) and, when status is set, the status of
// the last POST's answer (the audit's upstream status: a session's
// DELETE at its close is not the call's).
type withHeader struct {
	base        http.RoundTripper
	name, value string
	refused     *atomic.Bool
	status      *atomic.Int32
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	resp, err := h.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		h.refused.Store(true)
	}
	if h.status != nil && r.Method == http.MethodPost {
		switch {
		case err == nil:
			h.status.Store(int32(resp.StatusCode))
		case h.status.Load() > 0:
			// A POST of a session the server answered before went
			// unanswered: the call may have reached it (-1, unknown).
			h.status.Store(-1)
		}
	}
	return resp, err
}

// session opens an MCP client session on a custom server with its key.
// Redirects are refused: the key is for the URL the user gave.
func (u *upstream) session(ctx context.Context, c Custom, refused *atomic.Bool, status *atomic.Int32) (*sdk.ClientSession, error) {
	hc := &http.Client{
		Transport:     withHeader{u.tr, c.Header, c.Key, refused, status},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	cl := sdk.NewClient(&sdk.Implementation{Name: "cocoonbox-connect", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, unauthorized(refused, fmt.Errorf("%w %s: %v", ErrUpstream, c.URL, err))
	}
	return cs, nil
}

// unauthorized is err, also an errUnauthorized when the server answered
// 401 on the way.
func unauthorized(refused *atomic.Bool, err error) error {
	if err != nil && refused.Load() {
		return fmt.Errorf("%w (%w)", err, errUnauthorized)
	}
	return err
}

// outbound is a context for a call to a server that ends with ctx or
// after CallTimeout but carries none of ctx's values: a door call's ctx
// is the Go SDK server's, whose protocol version (the door client's) the
// SDK's client would otherwise send upstream as its own, and a stateful
// server refuses 2026-07-28.
func outbound(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithTimeoutCause(context.Background(), CallTimeout, context.DeadlineExceeded)
	stop := context.AfterFunc(ctx, cancel)
	return out, func() { stop(); cancel() }
}

// listTools answers the server's tools (every page) and its name.
func (u *upstream) listTools(ctx context.Context, c Custom) ([]*sdk.Tool, string, error) {
	ctx, cancel := outbound(ctx)
	defer cancel()
	var refused atomic.Bool
	cs, err := u.session(ctx, c, &refused, nil)
	if err != nil {
		return nil, "", err
	}
	defer cs.Close()
	var tools []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, "", unauthorized(&refused, fmt.Errorf("%w %s: tools/list: %v", ErrUpstream, c.URL, err))
		}
		tools = append(tools, t)
		if len(tools) > maxTools {
			return nil, "", fmt.Errorf("%w %s: more than %d tools", ErrUpstream, c.URL, maxTools)
		}
	}
	account := ""
	if r := cs.InitializeResult(); r != nil && r.ServerInfo != nil {
		account = r.ServerInfo.Name + " " + r.ServerInfo.Version
	}
	return tools, account, nil
}

// maxTools bounds what one server may list.
const maxTools = 512

// callTool calls one tool with the arguments as the door got them;
// status gets the HTTP status of the server's last answer to a POST.
func (u *upstream) callTool(ctx context.Context, c Custom, name string, args any, status *atomic.Int32) (*sdk.CallToolResult, error) {
	ctx, cancel := outbound(ctx)
	defer cancel()
	var refused atomic.Bool
	cs, err := u.session(ctx, c, &refused, status)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, unauthorized(&refused, fmt.Errorf("%w %s: tools/call %s: %v", ErrUpstream, c.URL, name, err))
	}
	return res, nil
}
