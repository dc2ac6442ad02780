package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"connectrpc.com/connect"
	sandboxv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/sandbox/v1/sandboxv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// chunk is the most bytes one stream message carries.
const chunk = 256 << 10

// Window is the HTTP/2 receive window, per stream and per connection, that
// both ends set: Go's default (1 MiB) held a full-duplex exec stream to a
// few tens of MiB/s.
const Window = 16 << 20

// handler serves one supervisor.
type handler struct {
	sup sandbox.Supervisor
}

// NewHandler returns the path prefix and the handler that serve sup as
// cocoonbox.sandbox.v1.Sandbox; mount it on an HTTP/2 (h2c) server without
// read or write timeouts, since exec and relay streams live as long as
// their command or connection.
//
// Compression is off: exec and relay streams are mostly incompressible, and
// gzip held them to about 47 MiB/s.
func NewHandler(sup sandbox.Supervisor, opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append([]connect.HandlerOption{connect.WithCompression("gzip", nil, nil)}, opts...)
	return sandboxv1connect.NewSandboxHandler(&handler{sup: sup}, opts...)
}

var _ sandboxv1connect.SandboxHandler = (*handler)(nil)

func reply[T any](msg *T, err error) (*connect.Response[T], error) {
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(msg), nil
}

func (h *handler) Images(ctx context.Context, _ *connect.Request[sandboxv1.ImagesRequest]) (*connect.Response[sandboxv1.ImagesResponse], error) {
	imgs, err := h.sup.Images(ctx)
	out := &sandboxv1.ImagesResponse{}
	for _, i := range imgs {
		out.Images = append(out.Images, &sandboxv1.Image{Ref: i.Ref, Version: int32(i.Version), Tier: i.Tier})
	}
	return reply(out, err)
}

func (h *handler) SetTenantCap(ctx context.Context, r *connect.Request[sandboxv1.SetTenantCapRequest]) (*connect.Response[sandboxv1.SetTenantCapResponse], error) {
	return reply(&sandboxv1.SetTenantCapResponse{}, h.sup.SetTenantCap(ctx, r.Msg.GetTenant(), int(r.Msg.GetMaxClaims())))
}

func machineReply(m sandbox.Machine, err error) (*connect.Response[sandboxv1.Machine], error) {
	return reply(machineToProto(m), err)
}

func (h *handler) Create(ctx context.Context, r *connect.Request[sandboxv1.CreateRequest]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Create(ctx, specFromProto(r.Msg.GetSpec())))
}

func (h *handler) Boot(ctx context.Context, r *connect.Request[sandboxv1.BootRequest]) (*connect.Response[sandboxv1.Machine], error) {
	var first []sandbox.Command
	for _, f := range r.Msg.GetFirst() {
		first = append(first, sandbox.Command{Args: f.GetArgs(), Stdin: f.GetStdin()})
	}
	return machineReply(h.sup.Boot(ctx, r.Msg.GetId(), first...))
}

func (h *handler) Get(ctx context.Context, r *connect.Request[sandboxv1.MachineRef]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Get(ctx, r.Msg.GetId()))
}

func (h *handler) List(ctx context.Context, r *connect.Request[sandboxv1.ListRequest]) (*connect.Response[sandboxv1.ListResponse], error) {
	ms, err := h.sup.List(ctx, r.Msg.GetTenant())
	out := &sandboxv1.ListResponse{}
	for _, m := range ms {
		out.Machines = append(out.Machines, machineToProto(m))
	}
	return reply(out, err)
}

func (h *handler) PutFile(ctx context.Context, r *connect.Request[sandboxv1.PutFileRequest]) (*connect.Response[sandboxv1.PutFileResponse], error) {
	return reply(&sandboxv1.PutFileResponse{}, h.sup.PutFile(ctx, r.Msg.GetId(), fileFromProto(r.Msg)))
}

func (h *handler) SetClaimEnv(ctx context.Context, r *connect.Request[sandboxv1.SetClaimEnvRequest]) (*connect.Response[sandboxv1.SetClaimEnvResponse], error) {
	return reply(&sandboxv1.SetClaimEnvResponse{}, h.sup.SetClaimEnv(ctx, r.Msg.GetId(), claimsFromProto(r.Msg.GetEntries())))
}

func (h *handler) Hibernate(ctx context.Context, r *connect.Request[sandboxv1.MachineRef]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Hibernate(ctx, r.Msg.GetId()))
}

func (h *handler) Wake(ctx context.Context, r *connect.Request[sandboxv1.MachineRef]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Wake(ctx, r.Msg.GetId()))
}

func (h *handler) Save(ctx context.Context, r *connect.Request[sandboxv1.SaveRequest]) (*connect.Response[sandboxv1.SaveInfo], error) {
	s, err := h.sup.Save(ctx, r.Msg.GetId(), r.Msg.GetSaveId())
	return reply(saveToProto(s), err)
}

func (h *handler) Restore(ctx context.Context, r *connect.Request[sandboxv1.RestoreRequest]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Restore(ctx, r.Msg.GetSaveId(), specFromProto(r.Msg.GetSpec())))
}

func (h *handler) DeleteSave(ctx context.Context, r *connect.Request[sandboxv1.SaveRef]) (*connect.Response[sandboxv1.DeleteSaveResponse], error) {
	return reply(&sandboxv1.DeleteSaveResponse{}, h.sup.DeleteSave(ctx, r.Msg.GetId()))
}

func (h *handler) Clone(ctx context.Context, r *connect.Request[sandboxv1.CloneRequest]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Clone(ctx, r.Msg.GetSourceId(), specFromProto(r.Msg.GetSpec())))
}

func (h *handler) Rebase(ctx context.Context, r *connect.Request[sandboxv1.RebaseRequest]) (*connect.Response[sandboxv1.Machine], error) {
	return machineReply(h.sup.Rebase(ctx, r.Msg.GetId(), r.Msg.GetImage()))
}

func (h *handler) Delete(ctx context.Context, r *connect.Request[sandboxv1.MachineRef]) (*connect.Response[sandboxv1.DeleteResponse], error) {
	return reply(&sandboxv1.DeleteResponse{}, h.sup.Delete(ctx, r.Msg.GetId()))
}

func (h *handler) Watch(ctx context.Context, r *connect.Request[sandboxv1.WatchRequest], s *connect.ServerStream[sandboxv1.Event]) error {
	events, err := h.sup.Watch(ctx, r.Msg.GetAfter())
	if err != nil {
		return toConnect(err)
	}
	for e := range events {
		if err := s.Send(eventToProto(e)); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return connect.NewError(connect.CodeResourceExhausted, errors.New("watcher too slow: watch again from the last seq"))
}

// Exec runs the command for as long as it runs: no deadline of the wire's
// cuts it, and its output is sent as it comes (Must show: a long silence
// then a megabyte).
func (h *handler) Exec(ctx context.Context, s *connect.BidiStream[sandboxv1.ExecRequest, sandboxv1.ExecResponse]) error {
	first, err := s.Receive()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return toConnect(sandbox.Invalid("exec", "the first message must be start"))
	}
	tty, err := sizeFromProto(start.GetTty())
	if err != nil {
		return toConnect(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := h.sup.Exec(ctx, start.GetId(), sandbox.ExecRequest{Args: start.GetArgs(), Env: start.GetEnv(),
		User: start.GetUser(), Login: start.GetLogin(), Dir: start.GetDir(), TTY: tty})
	if err != nil {
		return toConnect(err)
	}
	var sendMu sync.Mutex
	send := func(m *sandboxv1.ExecResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return s.Send(m)
	}
	if err := send(&sandboxv1.ExecResponse{Msg: &sandboxv1.ExecResponse_Started{Started: true}}); err != nil {
		return err
	}
	go h.execInput(ctx, s, p)
	var wg sync.WaitGroup
	pump := func(r io.Reader, wrap func([]byte) *sandboxv1.ExecResponse) {
		defer wg.Done()
		buf := make([]byte, chunk)
		for {
			n, err := r.Read(buf)
			if n > 0 && send(wrap(append([]byte(nil), buf[:n]...))) != nil {
				cancel() // the client is gone: the command goes too
				_, _ = io.Copy(io.Discard, r)
				return
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go pump(p.Stdout(), func(b []byte) *sandboxv1.ExecResponse {
		return &sandboxv1.ExecResponse{Msg: &sandboxv1.ExecResponse_Stdout{Stdout: b}}
	})
	go pump(p.Stderr(), func(b []byte) *sandboxv1.ExecResponse {
		return &sandboxv1.ExecResponse{Msg: &sandboxv1.ExecResponse_Stderr{Stderr: b}}
	})
	wg.Wait()
	st, err := p.Wait()
	if err != nil {
		return toConnect(err)
	}
	return send(&sandboxv1.ExecResponse{Msg: &sandboxv1.ExecResponse_Exit{Exit: &sandboxv1.ExitStatus{Code: int32(st.Code), Signal: st.Signal}}})
}

// execInput feeds stdin and resizes until the client's side ends.
func (h *handler) execInput(ctx context.Context, s *connect.BidiStream[sandboxv1.ExecRequest, sandboxv1.ExecResponse], p sandbox.Process) {
	stdinOpen := true
	defer func() {
		if stdinOpen {
			p.Stdin().Close()
		}
	}()
	for {
		m, err := s.Receive()
		if err != nil {
			return
		}
		switch msg := m.GetMsg().(type) {
		case *sandboxv1.ExecRequest_Stdin:
			if stdinOpen {
				if _, err := p.Stdin().Write(msg.Stdin); err != nil {
					stdinOpen = false
				}
			}
		case *sandboxv1.ExecRequest_StdinEof:
			if stdinOpen {
				p.Stdin().Close()
				stdinOpen = false
			}
		case *sandboxv1.ExecRequest_Resize:
			if size, err := sizeFromProto(msg.Resize); err == nil && size != nil {
				_ = p.Resize(ctx, *size) // the client checked it; a refusal changes nothing
			}
		}
	}
}

// Relay splices the stream to a connection to the box's loopback port.
func (h *handler) Relay(ctx context.Context, s *connect.BidiStream[sandboxv1.RelayRequest, sandboxv1.RelayResponse]) error {
	first, err := s.Receive()
	if err != nil {
		return err
	}
	c, err := h.sup.Dial(ctx, first.GetId(), int(first.GetPort()))
	if err != nil {
		return toConnect(err)
	}
	defer c.Close()
	if err := s.Send(&sandboxv1.RelayResponse{Connected: true}); err != nil {
		return err
	}
	go func() {
		m := first
		for {
			if len(m.GetData()) > 0 {
				if _, err := c.Write(m.GetData()); err != nil {
					c.Close()
					return
				}
			}
			if m.GetEof() {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				return
			}
			if m, err = s.Receive(); err != nil {
				c.Close()
				return
			}
		}
	}()
	buf := make([]byte, chunk)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if err := s.Send(&sandboxv1.RelayResponse{Data: append([]byte(nil), buf[:n]...)}); err != nil {
				return err
			}
		}
		if err != nil {
			return nil
		}
	}
}
