package session

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

type stream = connect.BidiStream[controlv1.SessionExecRequest, controlv1.SessionExecResponse]

// Exec runs start's command in the caller's box until it ends, however
// long that is: nothing here has a deadline. Every step of the path waits
// for the next one (stdin for the command's pipe, output for the
// client's HTTP/2 window), so the api holds at most a chunk per stream and
// direction besides the transports' windows.
//
// Errors before started: UNAUTHENTICATED without a caller, INVALID_ARGUMENT
// for a start that breaks a rule (Check), NOT_FOUND for a box that is not
// the caller's, FAILED_PRECONDITION for one that is not running. After
// started, a resize with zero rows or columns, a resize without a tty or a
// second start ends the call with INVALID_ARGUMENT (and the command with
// it); otherwise the last response is the exit status.
//
// Contract: Remote command (Session.Exec, cocoonbox rsh).
func (s *Service) Exec(ctx context.Context, st *stream) error {
	userID, err := s.user(ctx)
	if err != nil {
		return err
	}
	first, err := st.Receive()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return invalid("start", "the first message must be start")
	}
	req, err := Check(start)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	box, err := s.boxes.Locate(ctx, userID, start.GetBox())
	if err != nil {
		return s.status(ctx, "find the box", err)
	}
	began := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := box.Supervisor.Exec(ctx, box.BoxID, req)
	if err != nil {
		return s.status(ctx, "exec in box "+box.Name, err)
	}
	out := &sender{st: st}
	if err := out.send(&controlv1.SessionExecResponse{Msg: &controlv1.SessionExecResponse_Started{Started: true}}); err != nil {
		cancel()
		_, _ = p.Wait()
		return err
	}
	in := &input{st: st, p: p, tty: req.TTY != nil, cancel: cancel}
	go in.feed(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go out.pump(&wg, cancel, p.Stdout(), func(b []byte) *controlv1.SessionExecResponse {
		return &controlv1.SessionExecResponse{Msg: &controlv1.SessionExecResponse_Stdout{Stdout: b}}
	})
	go out.pump(&wg, cancel, p.Stderr(), func(b []byte) *controlv1.SessionExecResponse {
		return &controlv1.SessionExecResponse{Msg: &controlv1.SessionExecResponse_Stderr{Stderr: b}}
	})
	wg.Wait()
	status, err := p.Wait()
	if bad := in.failure(); bad != nil {
		return bad
	}
	if err != nil {
		return s.status(ctx, "exec in box "+box.Name, err)
	}
	// Nothing of the command's text: its first word alone was
	// `GH_TOKEN=ghp_… gh` when a script quoted it as one.
	s.log.InfoContext(ctx, "exec", "box", box.BoxID, "host", box.Host, "argc", len(req.Args), "command_bytes", commandBytes(req.Args),
		"tty", req.TTY != nil, "code", status.Code, "duration", time.Since(began).Round(time.Millisecond))
	return out.send(&controlv1.SessionExecResponse{Msg: &controlv1.SessionExecResponse_Exit{
		Exit: &controlv1.SessionExitStatus{Code: int32(status.Code), Signal: status.Signal}}})
}

// Check checks a start and answers the supervisor's request: the command
// as user through the login shell, the terminal with TERM. Its error is
// an *sandbox.InvalidError naming the field and the rule.
func Check(start *controlv1.SessionExecStart) (sandbox.ExecRequest, error) {
	req := sandbox.ExecRequest{Args: start.GetCommand(), User: BoxUser, Login: true}
	if strings.TrimSpace(strings.Join(req.Args, " ")) == "" {
		return req, sandbox.Invalid("start.command", "empty: give the program to run and its arguments")
	}
	if t := start.GetTty(); t != nil {
		size, err := windowSize("start.tty", t)
		if err != nil {
			return req, err
		}
		req.TTY = &size
		term := start.GetTerm()
		if term == "" {
			term = DefaultTerm
		}
		if err := checkTerm(term); err != nil {
			return req, err
		}
		req.Env = []string{"TERM=" + term}
	} else if start.GetTerm() != "" {
		return req, sandbox.Invalid("start.term", "a TERM without a tty: set tty too, or leave term empty")
	}
	return req, req.Check()
}

// DefaultTerm is a tty's TERM when start names none.
const DefaultTerm = "xterm-256color"

// checkTerm holds a TERM to a terminfo entry's name (client.IsTerm).
func checkTerm(term string) error {
	if !client.IsTerm(term) {
		return sandbox.Invalid("start.term", "%q is not a terminfo name: 1 to 64 of [A-Za-z0-9._+-], from a letter or digit", term)
	}
	return nil
}

// windowSize is a TerminalSize checked: rows and cols 1 to 65535.
func windowSize(field string, t *controlv1.TerminalSize) (sandbox.WindowSize, error) {
	if t.GetRows() < 1 || t.GetCols() < 1 || t.GetRows() > 65535 || t.GetCols() > 65535 {
		return sandbox.WindowSize{}, sandbox.Invalid(field, "rows %d and cols %d must each be 1 to 65535", t.GetRows(), t.GetCols())
	}
	return sandbox.WindowSize{Rows: uint16(t.GetRows()), Cols: uint16(t.GetCols())}, nil
}

func invalid(field, rule string) error {
	return connect.NewError(connect.CodeInvalidArgument, sandbox.Invalid(field, "%s", rule))
}

// sender serialises the responses of the two output pumps and the exit.
type sender struct {
	mu sync.Mutex
	st *stream
}

func (o *sender) send(m *controlv1.SessionExecResponse) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.st.Send(m)
}

// pump sends r's bytes as they come. A send fails only when the client is
// gone: the command is ended then, and its output drained so it can exit.
func (o *sender) pump(wg *sync.WaitGroup, cancel context.CancelFunc, r io.Reader, wrap func([]byte) *controlv1.SessionExecResponse) {
	defer wg.Done()
	buf := make([]byte, client.ExecChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 && o.send(wrap(append([]byte(nil), buf[:n]...))) != nil {
			cancel()
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if err != nil {
			return
		}
	}
}

// input feeds the client's stdin and resizes to the command until the
// client's side of the stream ends.
type input struct {
	st     *stream
	p      sandbox.Process
	tty    bool
	cancel context.CancelFunc
	mu     sync.Mutex
	bad    error
}

func (in *input) feed(ctx context.Context) {
	open := true
	closeStdin := func() {
		if open {
			_ = in.p.Stdin().Close()
			open = false
		}
	}
	defer closeStdin()
	for {
		m, err := in.st.Receive()
		if err != nil {
			return // io.EOF: the client sent all it will; else it is gone
		}
		switch msg := m.GetMsg().(type) {
		case *controlv1.SessionExecRequest_Stdin:
			// A command that exited or closed its stdin takes no more;
			// the rest is read and dropped so resizes still arrive.
			if open {
				if _, err := in.p.Stdin().Write(msg.Stdin); err != nil {
					open = false
				}
			}
		case *controlv1.SessionExecRequest_StdinEof:
			closeStdin()
		case *controlv1.SessionExecRequest_Resize:
			if err := in.resize(ctx, msg.Resize); err != nil {
				in.fail(err)
				return
			}
		case *controlv1.SessionExecRequest_Start:
			in.fail(invalid("start", "a second start: one call runs one command"))
			return
		}
	}
}

func (in *input) resize(ctx context.Context, t *controlv1.TerminalSize) error {
	if !in.tty {
		return invalid("resize", "the command has no terminal to resize (start it with tty)")
	}
	size, err := windowSize("resize", t)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	// The supervisor refuses only a terminal already gone (the command
	// just ended): its exit status is the answer then, not this.
	_ = in.p.Resize(ctx, size)
	return nil
}

// fail ends the call with err: the command is killed, and Exec answers err.
func (in *input) fail(err error) {
	in.mu.Lock()
	in.bad = err
	in.mu.Unlock()
	in.cancel()
}

func (in *input) failure() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.bad
}

// commandBytes is the length of a command's words together, what the log
// says of its size.
func commandBytes(args []string) int {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	return n
}
