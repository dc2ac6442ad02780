package wire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	sandboxv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1/sandboxv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Client is a sandbox.Supervisor served by a cocoonbox-sandboxd.
type Client struct {
	rpc sandboxv1connect.SandboxClient
}

var _ sandbox.Supervisor = (*Client)(nil)

// NewClient calls the supervisor at baseURL through httpClient, which must
// speak HTTP/2 (see H2CClient) for the streams.
func NewClient(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *Client {
	return &Client{rpc: sandboxv1connect.NewSandboxClient(httpClient, baseURL, append([]connect.ClientOption{connect.WithGRPC(), connect.WithAcceptCompression("gzip", nil, nil)}, opts...)...)}
}

// H2CClient is an HTTP client for a cleartext HTTP/2 sandboxd: on a unix
// socket when socket is set (the host part of the URL is then ignored),
// or on TCP, which is for loopback only (config.SandboxdURL refuses
// another address). token, when set, goes as a bearer token on every
// call. It pings a connection after pingAfter without a frame (0 for
// 15 s), so a silent exec keeps its connection and a dead peer is found.
func H2CClient(socket, token string, pingAfter time.Duration) *http.Client {
	t := transport(pingAfter)
	t.Protocols.SetUnencryptedHTTP2(true)
	if socket != "" {
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}
	}
	return withToken(t, token)
}

// TLSClient is an HTTP client for an https:// sandboxd: HTTP/2 over TLS
// (1.3, negotiated by ALPN), the daemon's certificate checked against
// tlsConfig's roots (see ClientTLS) and the URL's host; token and
// pingAfter as for H2CClient.
func TLSClient(tlsConfig *tls.Config, token string, pingAfter time.Duration) *http.Client {
	t := transport(pingAfter)
	t.Protocols.SetHTTP2(true)
	t.TLSClientConfig = tlsConfig.Clone()
	return withToken(t, token)
}

// ClientTLS is the TLS configuration of a client that trusts the
// certificates of the PEM file caFile (a CA, or a daemon's own
// self-signed certificate, which pins it) and nothing else.
func ClientTLS(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("sandboxd CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("sandboxd CA file %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}, nil
}

// ClientIdle is how long the client keeps a connection with no open call:
// under the daemon's own idle timeout (cocoonbox-sandboxd --idle-timeout,
// 5 min by default), so the client drops an idle connection before the
// daemon closes it. The other way round, a call can go out on a
// connection the daemon is closing: a graceful GOAWAY crossing it (which
// open sends again), or, when the close is quicker than the GOAWAY is
// read, "write: broken pipe", which says nothing of whether the daemon
// saw the call and so cannot be sent again (TestWireExecStreamsExitStatusesAndSilence
// failed so on a loaded host, its daemon's idle timeout at 500 ms).
const ClientIdle = time.Minute

// transport is an HTTP/2 transport (its Protocols empty: the caller says
// which) with the wire's windows, pings and idle timeout.
func transport(pingAfter time.Duration) *http.Transport {
	if pingAfter == 0 {
		pingAfter = 15 * time.Second
	}
	return &http.Transport{Protocols: new(http.Protocols), IdleConnTimeout: ClientIdle,
		HTTP2: &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: pingAfter,
			MaxReceiveBufferPerStream: Window, MaxReceiveBufferPerConnection: Window}}
}

func withToken(t *http.Transport, token string) *http.Client {
	var rt http.RoundTripper = t
	if token != "" {
		rt = bearer{token: token, next: t}
	}
	return &http.Client{Transport: rt}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func call[Req, Resp any](ctx context.Context, op string, f func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, error) {
	resp, err := f(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, fromConnect(op, err)
	}
	return resp.Msg, nil
}

func (c *Client) machine(ctx context.Context, op string, f func(context.Context, *connect.Request[sandboxv1.MachineRef]) (*connect.Response[sandboxv1.Machine], error), id string) (sandbox.Machine, error) {
	m, err := call(ctx, op, f, &sandboxv1.MachineRef{Id: id})
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machineFromProto(m), nil
}

// Images implements sandbox.Supervisor.
func (c *Client) Images(ctx context.Context) ([]sandbox.Image, error) {
	r, err := call(ctx, "images", c.rpc.Images, &sandboxv1.ImagesRequest{})
	if err != nil {
		return nil, err
	}
	var out []sandbox.Image
	for _, i := range r.GetImages() {
		out = append(out, sandbox.Image{Ref: i.GetRef(), Version: int(i.GetVersion()), Tier: i.GetTier()})
	}
	return out, nil
}

// SetTenantCap implements sandbox.Supervisor.
func (c *Client) SetTenantCap(ctx context.Context, tenant string, maxClaims int) error {
	_, err := call(ctx, "set tenant cap", c.rpc.SetTenantCap, &sandboxv1.SetTenantCapRequest{Tenant: tenant, MaxClaims: int32(maxClaims)})
	return err
}

// Create implements sandbox.Supervisor.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Machine, error) {
	m, err := call(ctx, "create", c.rpc.Create, &sandboxv1.CreateRequest{Spec: specToProto(spec)})
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machineFromProto(m), nil
}

// Boot implements sandbox.Supervisor.
func (c *Client) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	req := &sandboxv1.BootRequest{Id: id}
	for _, f := range first {
		req.First = append(req.First, &sandboxv1.Command{Args: f.Args, Stdin: f.Stdin})
	}
	m, err := call(ctx, "boot", c.rpc.Boot, req)
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machineFromProto(m), nil
}

// Get implements sandbox.Supervisor.
func (c *Client) Get(ctx context.Context, id string) (sandbox.Machine, error) {
	return c.machine(ctx, "get", c.rpc.Get, id)
}

// List implements sandbox.Supervisor.
func (c *Client) List(ctx context.Context, tenant string) ([]sandbox.Machine, error) {
	r, err := call(ctx, "list", c.rpc.List, &sandboxv1.ListRequest{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Machine, 0, len(r.GetMachines()))
	for _, m := range r.GetMachines() {
		out = append(out, machineFromProto(m))
	}
	return out, nil
}

// PutFile implements sandbox.Supervisor.
func (c *Client) PutFile(ctx context.Context, id string, f sandbox.File) error {
	_, err := call(ctx, "put file", c.rpc.PutFile, &sandboxv1.PutFileRequest{Id: id, Path: f.Path, Data: f.Data, Mode: uint32(f.Mode), Owner: f.Owner})
	return err
}

// SetClaimEnv implements sandbox.Supervisor.
func (c *Client) SetClaimEnv(ctx context.Context, id string, entries []sandbox.ClaimEntry) error {
	_, err := call(ctx, "set claim env", c.rpc.SetClaimEnv, &sandboxv1.SetClaimEnvRequest{Id: id, Entries: claimsToProto(entries)})
	return err
}

// Hibernate implements sandbox.Supervisor.
func (c *Client) Hibernate(ctx context.Context, id string) (sandbox.Machine, error) {
	return c.machine(ctx, "hibernate", c.rpc.Hibernate, id)
}

// Wake implements sandbox.Supervisor.
func (c *Client) Wake(ctx context.Context, id string) (sandbox.Machine, error) {
	return c.machine(ctx, "wake", c.rpc.Wake, id)
}

// Save implements sandbox.Supervisor.
func (c *Client) Save(ctx context.Context, id, saveID string) (sandbox.SaveInfo, error) {
	s, err := call(ctx, "save", c.rpc.Save, &sandboxv1.SaveRequest{Id: id, SaveId: saveID})
	if err != nil {
		return sandbox.SaveInfo{}, err
	}
	return saveFromProto(s), nil
}

// Restore implements sandbox.Supervisor.
func (c *Client) Restore(ctx context.Context, saveID string, spec sandbox.Spec) (sandbox.Machine, error) {
	m, err := call(ctx, "restore", c.rpc.Restore, &sandboxv1.RestoreRequest{SaveId: saveID, Spec: specToProto(spec)})
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machineFromProto(m), nil
}

// DeleteSave implements sandbox.Supervisor.
func (c *Client) DeleteSave(ctx context.Context, saveID string) error {
	_, err := call(ctx, "delete save", c.rpc.DeleteSave, &sandboxv1.SaveRef{Id: saveID})
	return err
}

// Clone implements sandbox.Supervisor.
func (c *Client) Clone(ctx context.Context, sourceID string, spec sandbox.Spec) (sandbox.Machine, error) {
	m, err := call(ctx, "clone", c.rpc.Clone, &sandboxv1.CloneRequest{SourceId: sourceID, Spec: specToProto(spec)})
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machineFromProto(m), nil
}

// Rebase implements sandbox.Supervisor.
func (c *Client) Rebase(ctx context.Context, id, image string) (sandbox.Machine, error) {
	m, err := call(ctx, "rebase", c.rpc.Rebase, &sandboxv1.RebaseRequest{Id: id, Image: image})
	if err != nil {
		return sandbox.Machine{}, err
	}
	return machineFromProto(m), nil
}

// Delete implements sandbox.Supervisor.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := call(ctx, "delete", c.rpc.Delete, &sandboxv1.MachineRef{Id: id})
	return err
}

// Watch implements sandbox.Supervisor. The call is made in the
// background (a server stream's headers come with its first event, so
// waiting for them here would wait for the next change); the channel
// closes when ctx ends or the stream breaks: watch again from the last
// Seq, which loses nothing the supervisor still holds.
func (c *Client) Watch(ctx context.Context, after uint64) (<-chan sandbox.Event, error) {
	ch := make(chan sandbox.Event, 256)
	go func() {
		defer close(ch)
		s, err := c.rpc.Watch(ctx, connect.NewRequest(&sandboxv1.WatchRequest{After: after}))
		if err != nil {
			return
		}
		defer s.Close()
		for s.Receive() {
			select {
			case ch <- eventFromProto(s.Msg()):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// Exec implements sandbox.Supervisor. The request is checked here too, so
// a bad one fails before anything crosses the wire.
func (c *Client) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	start := &sandboxv1.ExecStart{Id: id, Args: req.Args, Env: req.Env, User: req.User, Login: req.Login, Dir: req.Dir, Tty: sizeToProto(req.TTY)}
	// The first answer tells a refused exec (wrong state, unknown machine)
	// from a started one, so Exec's error is the supervisor's.
	s, first, err := open(ctx, c.rpc.Exec, &sandboxv1.ExecRequest{Msg: &sandboxv1.ExecRequest_Start{Start: start}})
	if err == nil && !first.GetStarted() {
		_ = s.CloseRequest()
		err = errors.New("the exec stream did not start with started")
	}
	if err != nil {
		return nil, fromConnect("exec", err)
	}
	p := &remoteProcess{s: s, tty: req.TTY != nil, done: make(chan struct{})}
	p.stdoutR, p.stdoutW = io.Pipe()
	p.stderrR, p.stderrW = io.Pipe()
	go p.receive()
	return p, nil
}

// open starts a stream with its first message and answers the server's
// first message on it. A server closing an idle connection (its idle
// timeout: a graceful GOAWAY) can cross a new stream on the wire; the
// server never processed that stream, but the transport cannot retry a
// request whose body it began to send, so open does, up to five times.
// Only a stream the server refused unprocessed is tried again, so a
// command never runs twice.
func open[Req, Res any](ctx context.Context, start func(context.Context) *connect.BidiStreamForClient[Req, Res], first *Req) (*connect.BidiStreamForClient[Req, Res], *Res, error) {
	for try := 1; ; try++ {
		s := start(ctx)
		err := s.Send(first)
		var m *Res
		// A Send that meets a stream the server already ended answers only
		// io.EOF (connect-go's contract); Receive then says why.
		if err == nil || errors.Is(err, io.EOF) {
			m, err = s.Receive()
		}
		if err == nil {
			return s, m, nil
		}
		_ = s.CloseRequest()
		_ = s.CloseResponse()
		if try == 5 || !unprocessed(err) {
			return nil, nil, err
		}
	}
}

// unprocessed says whether err is the transport's word that the server did
// not process the stream, which makes it safe to send again: HTTP/2's
// (RFC 9113 §8.7: a stream above a GOAWAY's last stream id, or refused with
// REFUSED_STREAM), or net/http's "cannot rewind body after connection
// loss", which for a streaming POST it says only when the connection it
// picked was gone before the request went out (a closing connection in the
// pool). Go's transport says so only in these texts.
func unprocessed(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "graceful shutdown GOAWAY") || strings.Contains(msg, "REFUSED_STREAM") ||
		strings.Contains(msg, "cannot rewind body after connection loss")
}

// remoteProcess is a command run through the Exec stream.
type remoteProcess struct {
	s                *connect.BidiStreamForClient[sandboxv1.ExecRequest, sandboxv1.ExecResponse]
	tty              bool
	sendMu           sync.Mutex
	stdoutR, stderrR *io.PipeReader
	stdoutW, stderrW *io.PipeWriter
	done             chan struct{}
	status           sandbox.ExitStatus
	err              error
}

func (p *remoteProcess) send(m *sandboxv1.ExecRequest) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.s.Send(m)
}

func (p *remoteProcess) receive() {
	defer close(p.done)
	for {
		m, err := p.s.Receive()
		if err != nil {
			p.fail(err)
			return
		}
		switch msg := m.GetMsg().(type) {
		case *sandboxv1.ExecResponse_Stdout:
			_, _ = p.stdoutW.Write(msg.Stdout)
		case *sandboxv1.ExecResponse_Stderr:
			_, _ = p.stderrW.Write(msg.Stderr)
		case *sandboxv1.ExecResponse_Exit:
			p.status = sandbox.ExitStatus{Code: int(msg.Exit.GetCode()), Signal: msg.Exit.GetSignal()}
			p.stdoutW.Close()
			p.stderrW.Close()
			_ = p.s.CloseResponse()
			_ = p.s.CloseRequest()
			return
		}
	}
}

func (p *remoteProcess) fail(err error) {
	if errors.Is(err, io.EOF) {
		err = errors.New("the exec stream ended without an exit status")
	}
	p.err = fromConnect("exec", err)
	p.stdoutW.CloseWithError(p.err)
	p.stderrW.CloseWithError(p.err)
	_ = p.s.CloseRequest()
}

func (p *remoteProcess) Stdin() io.WriteCloser { return remoteStdin{p} }
func (p *remoteProcess) Stdout() io.Reader     { return p.stdoutR }
func (p *remoteProcess) Stderr() io.Reader     { return p.stderrR }

func (p *remoteProcess) Resize(ctx context.Context, size sandbox.WindowSize) error {
	if !p.tty {
		return sandbox.Invalid("tty.size", "the command has no terminal to resize")
	}
	if err := size.Check(); err != nil {
		return err
	}
	return p.send(&sandboxv1.ExecRequest{Msg: &sandboxv1.ExecRequest_Resize{Resize: sizeToProto(&size)}})
}

func (p *remoteProcess) Wait() (sandbox.ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

type remoteStdin struct{ p *remoteProcess }

func (w remoteStdin) Write(b []byte) (int, error) {
	for off := 0; off < len(b); off += chunk {
		end := min(off+chunk, len(b))
		if err := w.p.send(&sandboxv1.ExecRequest{Msg: &sandboxv1.ExecRequest_Stdin{Stdin: b[off:end]}}); err != nil {
			return off, fmt.Errorf("exec stdin: %w", err)
		}
	}
	return len(b), nil
}

func (w remoteStdin) Close() error {
	return w.p.send(&sandboxv1.ExecRequest{Msg: &sandboxv1.ExecRequest_StdinEof{StdinEof: true}})
}

// Dial implements sandbox.Supervisor: the relay stream behind one end of
// a net.Pipe (so the caller has deadlines).
func (c *Client) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := sandbox.CheckPort(port); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s, m, err := open(sctx, c.rpc.Relay, &sandboxv1.RelayRequest{Id: id, Port: int32(port)})
	if err == nil && !m.GetConnected() {
		err = errors.New("the relay stream did not start with connected")
	}
	if err != nil {
		cancel()
		return nil, fromConnect("relay", err)
	}
	mine, theirs := net.Pipe()
	go func() { // the box to the caller
		defer theirs.Close()
		defer cancel()
		for {
			m, err := s.Receive()
			if err != nil {
				return
			}
			if _, err := theirs.Write(m.GetData()); err != nil {
				return
			}
		}
	}()
	go func() { // the caller to the box
		buf := make([]byte, chunk)
		for {
			n, err := theirs.Read(buf)
			if n > 0 && s.Send(&sandboxv1.RelayRequest{Data: append([]byte(nil), buf[:n]...)}) != nil {
				return
			}
			if err != nil {
				_ = s.Send(&sandboxv1.RelayRequest{Eof: true})
				_ = s.CloseRequest()
				return
			}
		}
	}()
	return mine, nil
}
