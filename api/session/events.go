package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// WatchCommand is what Events runs in the box, as BoxUser through the
// login shell, as Exec runs a command: the box agent's watch, a JSON line
// per session and then per change (guest/cmd/cocoonbox-agent, watch.go).
var WatchCommand = []string{"cocoonbox-agent", "offload", "watch"}

// maxWatchLine bounds one line of the agent's watch (a few short names);
// a longer one is not a watch line and is dropped.
const maxWatchLine = 64 << 10

// watchLine is the agent's watch line: only these fields are read, so
// nothing else (never a body) can reach a client.
type watchLine struct {
	Repo      string `json:"repo"`
	Name      string `json:"name"`
	CLI       string `json:"cli"`
	OffloadID string `json:"offload_id"`
	Entry     string `json:"entry"`
	Seq       int64  `json:"seq"`
	Status    string `json:"status"`
}

// Events streams the box's offload updates: the agent's watch run in the
// box through the supervisor's Exec (as Exec runs a command), each line
// relayed as an OffloadUpdate. Errors as Exec's before started
// (UNAUTHENTICATED, NOT_FOUND, FAILED_PRECONDITION); then it ends
// CANCELED when its call is ended (UNAUTHENTICATED by the token check
// when its token was revoked), UNAVAILABLE when the watch in the box
// ended (the box stopped, or its inbox restarted: call again). Replayed
// means here: each call starts with the current status of every session;
// outbox entries posted while no call was open are not sent again (the
// outbox keeps them: `cocoonbox offload` reads them).
//
// Contract: Offload, the inbox's watch op and "Event.".
func (s *Service) Events(ctx context.Context, req *connect.Request[controlv1.SessionEventsRequest], st *connect.ServerStream[controlv1.SessionEvent]) error {
	userID, err := s.user(ctx)
	if err != nil {
		return err
	}
	box, err := s.boxes.Locate(ctx, userID, req.Msg.GetBox())
	if err != nil {
		return s.status(ctx, "find the box", err)
	}
	watch, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := box.Supervisor.Exec(watch, box.BoxID, sandbox.ExecRequest{Args: WatchCommand, User: BoxUser, Login: true})
	if err != nil {
		return s.status(ctx, "watch box "+box.Name, err)
	}
	_ = p.Stdin().Close()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }() // the agent's progress, for a person
	sendErr := relay(p.Stdout(), st)
	cancel() // a client gone (sendErr) ends the watch in the box
	_, _ = io.Copy(io.Discard, p.Stdout())
	status, waitErr := p.Wait()
	if sendErr != nil || ctx.Err() != nil {
		// The call ended, never of itself: the client went, the api
		// stops, or its token was revoked (the token check answers that
		// UNAUTHENTICATED).
		return connect.NewError(connect.CodeCanceled, context.Canceled)
	}
	s.log.InfoContext(ctx, "offload watch ended", "box", box.BoxID, "code", status.Code, "err", waitErr)
	return client.MayRetry(connect.NewError(connect.CodeUnavailable, errors.New("the box's offload watch ended (the box stopped or its inbox restarted); call again")))
}

// relay sends each watch line of r as an OffloadUpdate until r ends (nil)
// or a send fails (its error).
func relay(r io.Reader, st *connect.ServerStream[controlv1.SessionEvent]) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4<<10), maxWatchLine)
	for sc.Scan() {
		var l watchLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Repo == "" || l.Status == "" {
			continue // the verb's last line (its error) or no watch line
		}
		u := &controlv1.OffloadUpdate{Repo: l.Repo, Name: l.Name, Cli: l.CLI, OffloadId: l.OffloadID, Entry: l.Entry, Status: l.Status}
		if l.Entry != "" {
			u.Seq = &l.Seq
		}
		if err := st.Send(&controlv1.SessionEvent{Event: &controlv1.SessionEvent_Offload{Offload: u}}); err != nil {
			return err
		}
	}
	return nil
}
