// Package inbox is the offload inbox (Contract: Offload, Inbox): the
// server behind /run/cocoonbox/offload.sock that stores each message and
// outbox entry durably, runs the repos' CLI sessions in tmux, delivers
// messages to them, and turns their hooks into a status.
//
// Concurrency: one mutex guards the records and the tmux calls; a change
// (an outbox entry, a status) closes the current "changed" channel, which
// wakes long-polls, and goes to every watch feed.
package inbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Server is one inbox. Fill Store, then call Serve.
type Server struct {
	Store offload.Store
	Log   *journal.Logger
	// Agent is the command the hooks and the CLIs call back,
	// "cocoonbox-agent" (found on PATH) unless set.
	Agent string
	// PollInterval is how often the sessions' panes and transcripts are
	// looked at (a CLI that dies without a hook is seen this way); 200 ms
	// unless set.
	PollInterval time.Duration

	ctx      context.Context // Serve's: ends the environment steps with the inbox
	mu       sync.Mutex
	tm       tmux
	sessions map[string]*offload.Session
	changed  chan struct{}
	watchers map[chan WatchEvent]struct{}
	envSteps map[string]chan struct{} // repo → closed when its running step ends
	// parked is how many read requests wait in a long poll now; the status
	// op answers it (ours, beside sessions), so a test or benchmark waits
	// for a read to be parked instead of sleeping.
	parked int
	// promptAt is, per repo, when claude last reported a prompt taken
	// (Unix ms; confirmSubmit).
	promptAt map[string]int64
}

// WatchEvent is one line of the watch feed: an outbox entry (Entry and
// Seq set) or a status change (both unset). Never a body.
type WatchEvent struct {
	Repo      string `json:"repo"`
	Name      string `json:"name"`
	CLI       string `json:"cli"`
	OffloadID string `json:"offload_id"`
	Entry     string `json:"entry,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
	Status    string `json:"status"`
}

func (s *Server) init() {
	if s.Agent == "" {
		s.Agent = "cocoonbox-agent"
	}
	if s.PollInterval == 0 {
		s.PollInterval = 200 * time.Millisecond
	}
	if s.Log == nil {
		s.Log = journal.New("cocoonbox-offload-inbox")
	}
	s.sessions = map[string]*offload.Session{}
	s.changed = make(chan struct{})
	s.watchers = map[chan WatchEvent]struct{}{}
	s.envSteps = map[string]chan struct{}{}
	s.promptAt = map[string]int64{}
}

// pinTmuxConfig writes Config to tmux.conf in the state directory and
// points every tmux command at it.
func (s *Server) pinTmuxConfig() error {
	if err := os.MkdirAll(s.Store.Paths.State, 0o700); err != nil {
		return err
	}
	conf := filepath.Join(s.Store.Paths.State, "tmux.conf")
	if err := offload.WriteFile(conf, []byte(Config)); err != nil {
		return fmt.Errorf("write the pinned tmux config: %w", err)
	}
	s.tm = tmux{conf: conf}
	return nil
}

// Listen binds the socket at path: a stale socket is removed first, and
// the umask is 0117 while it is made, so it is 0660 from its first moment
// (its group is the directory's, cbagent by the setgid bit).
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	old := umask(0o117)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod 0660 %s: %w", path, err)
	}
	return ln, nil
}

// Serve loads the records, finishes what a crash cut short (the restart
// check), then answers requests on ln until ctx ends, and returns nil
// then; a failed restart check, or a listener that fails, is its error.
// ready, when not nil, is called once the first request can be answered.
func (s *Server) Serve(ctx context.Context, ln net.Listener, ready func()) error {
	s.init()
	s.ctx = ctx
	if err := s.pinTmuxConfig(); err != nil {
		return err
	}
	s.mu.Lock()
	err := s.rescanLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	go s.poll(ctx)
	go func() { <-ctx.Done(); ln.Close() }()
	if ready != nil {
		ready()
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go s.handle(ctx, conn)
	}
}

// handle answers the requests of one connection, one line each.
func (s *Server) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	rd := bufio.NewReaderSize(conn, 64<<10)
	w := bufio.NewWriter(conn)
	for {
		line, tooLong, err := readLine(rd, offload.MaxRequest)
		if err != nil {
			return
		}
		var resp any
		if tooLong {
			resp = errResp(offload.Errorf(offload.CodeInvalid, "request line over the limit of %d bytes", offload.MaxRequest))
		} else if req, perr := offload.ParseRequest(line); perr != nil {
			resp = errResp(perr)
		} else if req.Op == "watch" {
			s.watch(ctx, w)
			return
		} else {
			resp = s.Do(ctx, req)
			if ctx.Err() != nil {
				return // a stopping inbox answers nothing: the client sees it down
			}
		}
		data, _ := json.Marshal(resp)
		w.Write(append(data, '\n'))
		if w.Flush() != nil {
			return
		}
	}
}

// readLine reads one line of at most max bytes; a longer line is read to
// its end and thrown away, with tooLong set.
func readLine(rd *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := rd.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			tooLong = true
			line = nil
		} else if !tooLong {
			line = append(line, chunk...)
		}
		switch {
		case err == nil:
			return line, tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, false, err
		}
	}
}

func errResp(err error) map[string]any {
	var e *offload.Error
	if !errors.As(err, &e) {
		e = offload.Errorf(offload.CodeFailed, "%v", err)
	}
	return map[string]any{"ok": false, "code": e.Code, "error": e.Msg}
}

// Do answers one parsed request (every op but watch) with its answer
// line's object: "ok" true and the op's fields, or ok false with the code
// (invalid, refused, failed) and error of an *offload.Error.
func (s *Server) Do(ctx context.Context, req *offload.Request) map[string]any {
	var resp map[string]any
	var err error
	switch req.Op {
	case "send":
		resp, err = s.send(req)
	case "post":
		resp, err = s.post(req)
	case "read":
		resp, err = s.read(ctx, req)
	case "env":
		resp, err = s.env(ctx, req)
	case "status":
		resp, err = s.status(req.Repo)
	case "restart":
		resp, err = s.restart(req.Repo)
	case "event":
		resp, err = s.event(req)
	case "rescan":
		s.mu.Lock()
		err = s.rescanLocked()
		s.mu.Unlock()
		resp = map[string]any{}
	default:
		err = offload.Errorf(offload.CodeInvalid, "unknown op %q", req.Op)
	}
	if err != nil {
		return errResp(err)
	}
	resp["ok"] = true
	return resp
}

// notifyLocked wakes the long-polls and sends ev to the watch feeds.
func (s *Server) notifyLocked(ev WatchEvent) {
	close(s.changed)
	s.changed = make(chan struct{})
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default: // a feed that does not keep up loses lines, never the inbox its pace
		}
	}
}

// watch streams change lines until the client goes or ctx ends.
func (s *Server) watch(ctx context.Context, w *bufio.Writer) {
	ch := make(chan WatchEvent, 256)
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-ch:
			data, _ := json.Marshal(ev)
			w.Write(append(data, '\n'))
			if w.Flush() != nil {
				return
			}
		}
	}
}

func nowMs() int64 { return time.Now().UnixMilli() }
