package boxes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Idle hibernate (Contract: OAuth for agents, "Idle hibernate" and "Idle
// user boxes"; docs/box-lifecycle.md). A client call is counted where it
// enters the api: Call opens it (the gRPC interceptor of Boxes and
// Session, the control MCP's tools/call), and the service binds it to the
// box the call names once it resolves it (begin, Locate, Status). A call
// that only watches (Boxes.Events, Session.Events, an MCP GET stream)
// opens none. Each api keeps its calls in memory and writes boxes.active_at
// (boxes migration 0004): at a call's start when it has not written the
// box within a check's period, and for every box with a call open or one
// begun or ended since, at each check; a box going running sets it too
// (writeBox), so the clock starts again at each wake. Every api checks
// every Idle.Every, so replicas see each other's calls.

// Idle configures idle hibernate.
type Idle struct {
	// Agent is how long an agent box may go without a client call before
	// it hibernates (oauth.idle_hibernate; 0 off).
	Agent time.Duration
	// User is the same for a user's own box (oauth.user_idle_hibernate; 0
	// off): it stays up while an offload session works, and a live save
	// comes first.
	User time.Duration
	// Every is how often the api looks (0 is DefaultIdleEvery).
	Every time.Duration
}

// DefaultIdleEvery is how often the api looks for idle boxes.
const DefaultIdleEvery = time.Minute

// offloadAnswerWithin bounds the wait for a box's offload status: a box
// that does not answer in time stays up until the next check.
const offloadAnswerWithin = 15 * time.Second

// watchOnly are the procedures that only watch a box: no client call.
var watchOnly = map[string]bool{
	"/cocoonbox.control.v1.Boxes/Events":   true,
	"/cocoonbox.control.v1.Session/Events": true,
}

// calls are this api's client calls by box.
type calls struct {
	mu      sync.Mutex
	open    map[string]int       // box id → calls open now
	moved   map[string]bool      // a call began or ended since the last check
	written map[string]time.Time // when this api last wrote the box's active_at
}

// callScope is one client call: the boxes it has named so far.
type callScope struct {
	mu   sync.Mutex
	ids  []string
	done bool
}

type scopeKey struct{}

// Call opens a client call under ctx: each box the call then names
// (acted on, located, its status read) counts it as open until
// end. Watch-only calls do not open one.
func (s *Service) Call(ctx context.Context) (context.Context, func()) {
	sc := &callScope{}
	return context.WithValue(ctx, scopeKey{}, sc), func() {
		sc.mu.Lock()
		ids := sc.ids
		sc.done = true
		sc.mu.Unlock()
		s.calls.mu.Lock()
		defer s.calls.mu.Unlock()
		for _, id := range ids {
			s.calls.open[id]--
			s.calls.moved[id] = true
		}
	}
}

// OpenCalls is how many client calls (Call) are open now on box id: what
// keeps it from idle hibernate. Tests read it to see that a surface opens
// its calls where it should and ends them.
func (s *Service) OpenCalls(id string) int {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return s.calls.open[id]
}

// touch binds the call of ctx (if any) to box id: open from now until the
// call ends.
func (s *Service) touch(ctx context.Context, id string) {
	sc, _ := ctx.Value(scopeKey{}).(*callScope)
	if sc == nil || id == "" {
		return
	}
	sc.mu.Lock()
	if sc.done || containsID(sc.ids, id) {
		sc.mu.Unlock()
		return
	}
	sc.ids = append(sc.ids, id)
	sc.mu.Unlock()
	s.calls.mu.Lock()
	s.calls.open[id]++
	s.calls.moved[id] = true
	stale := time.Since(s.calls.written[id]) > s.idle.Every
	if stale {
		s.calls.written[id] = time.Now()
	}
	s.calls.mu.Unlock()
	if stale { // another api's check may be about to look: tell it now
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if _, err := s.pool.Exec(s.ctx, "UPDATE boxes SET active_at = now() WHERE id = $1", id); err != nil && s.ctx.Err() == nil {
				s.log.Warn("boxes: a call's time not written", "box", id, "err", err)
			}
		}()
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// flushCalls writes active_at of every box with a call open or one begun
// or ended since the last flush, and forgets the boxes without a call.
func (s *Service) flushCalls(ctx context.Context) error {
	s.calls.mu.Lock()
	var ids []string
	now := time.Now()
	for id := range s.calls.moved {
		ids = append(ids, id)
	}
	for id, n := range s.calls.open {
		if n > 0 && !s.calls.moved[id] {
			ids = append(ids, id)
		}
		if n <= 0 {
			delete(s.calls.open, id)
		}
	}
	clear(s.calls.moved)
	for _, id := range ids {
		s.calls.written[id] = now
	}
	for id, at := range s.calls.written {
		if now.Sub(at) > 2*s.idle.Every && s.calls.open[id] == 0 {
			delete(s.calls.written, id)
		}
	}
	s.calls.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, "UPDATE boxes SET active_at = now() WHERE id = ANY($1)", ids)
	return err
}

// CallInterceptor counts the Boxes and Session gRPC calls as client calls
// of the boxes they name (all but the watch-only ones); without a Service
// it counts nothing.
func (h *Handler) CallInterceptor() connect.Interceptor { return callCounter{h.s} }

// Call is the Service's Call (ctx as it is without a Service).
func (h *Handler) Call(ctx context.Context) (context.Context, func()) {
	if h.s == nil {
		return ctx, func() {}
	}
	return h.s.Call(ctx)
}

type callCounter struct{ s *Service }

func (c callCounter) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if c.s == nil || watchOnly[req.Spec().Procedure] {
			return next(ctx, req)
		}
		ctx, end := c.s.Call(ctx)
		defer end()
		return next(ctx, req)
	}
}

func (c callCounter) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c callCounter) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if c.s == nil || watchOnly[conn.Spec().Procedure] {
			return next(ctx, conn)
		}
		ctx, end := c.s.Call(ctx)
		defer end()
		return next(ctx, conn)
	}
}

// idleLoop checks every Idle.Every until Close.
func (s *Service) idleLoop() {
	t := time.NewTicker(s.idle.Every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.idleCheck(s.ctx)
		s.idleChecks.Add(1)
	}
}

// idleBox is a running box past its threshold.
type idleBox struct {
	id, userID, name string
	agent            bool
}

// idleCheck writes this api's calls, then hibernates each agent box idle
// past Idle.Agent, and takes each user box idle past Idle.User through
// idleUser.
func (s *Service) idleCheck(ctx context.Context) {
	if err := s.flushCalls(ctx); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("boxes: idle check: the calls' times not written; no box hibernates this time", "err", err)
		}
		return
	}
	for _, b := range s.idleBoxes(ctx, "") {
		if ctx.Err() != nil {
			return
		}
		if b.agent {
			s.idleHibernate(ctx, b, "no client call")
		} else {
			s.idleUser(ctx, b)
		}
	}
}

// idleBoxes are the running boxes without an operation whose last call
// is older than their threshold (only box id when not "").
func (s *Service) idleBoxes(ctx context.Context, id string) []idleBox {
	secs := func(d time.Duration) float64 { return d.Seconds() }
	rows, err := s.pool.Query(ctx, `SELECT id, user_id::text, name, agent FROM boxes
 WHERE state = 'running' AND operation_id IS NULL AND ($3::text = '' OR id = $3::text)
 AND CASE WHEN agent THEN $1::float8 > 0 AND active_at < now() - make_interval(secs => $1::float8)
 ELSE $2::float8 > 0 AND active_at < now() - make_interval(secs => $2::float8) END
 ORDER BY active_at`, secs(s.idle.Agent), secs(s.idle.User), id)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("boxes: idle check: list the boxes", "err", err)
		}
		return nil
	}
	defer rows.Close()
	var out []idleBox
	for rows.Next() {
		var b idleBox
		if err := rows.Scan(&b.id, &b.userID, &b.name, &b.agent); err != nil {
			s.log.Warn("boxes: idle check: read a box", "err", err)
			return nil
		}
		out = append(out, b)
	}
	return out
}

// idleRequestID is a fresh request id of an idle hibernate's operation.
func idleRequestID(kind string) string {
	var r [8]byte
	rand.Read(r[:])
	return "idle-" + kind + "-" + hex.EncodeToString(r[:])
}

// idleHibernate hibernates b through the normal operation path (its
// events, recovery and a wake cancelling it hold as for any Hibernate).
func (s *Service) idleHibernate(ctx context.Context, b idleBox, why string) {
	_, op, err := s.Hibernate(ctx, Call{UserID: b.userID, RequestID: idleRequestID("hibernate"), Box: b.id})
	if err != nil {
		// Busy, not running any more, the queue full: the next check sees.
		s.log.Info("boxes: idle box not hibernated", "box", b.id, "err", err)
		return
	}
	s.log.Info("boxes: idle box hibernating", "box", b.id, "name", b.name, "agent", b.agent, "why", why, "operation", op.ID)
}

// idleUser takes a user's own idle box: it stays up while its scheduled
// wake is on (Config.KeepUp), while an offload
// session works in it (or while the box does not answer within
// offloadAnswerWithin); otherwise a live save first, then, if no client
// came meanwhile, the hibernate (a failed save still hibernates: the
// hibernation keeps memory and disk).
func (s *Service) idleUser(ctx context.Context, b idleBox) {
	if s.keepUp != nil {
		up, err := s.keepUp(ctx, b.id)
		if err != nil || up {
			// Contract: Idle user boxes, "it stays up while its
			// scheduled wake is on (SleepAt ahead)"; an answer not had
			// keeps it up until the next check.
			s.log.Info("boxes: idle box stays up: its scheduled wake is on", "box", b.id, "err", err)
			return
		}
	}
	working, err := s.offloadWorking(ctx, b)
	if err != nil {
		s.log.Info("boxes: idle box stays up: its offload status did not come", "box", b.id, "err", err)
		return
	}
	if working {
		s.log.Info("boxes: idle box stays up: an offload session works", "box", b.id)
		return
	}
	_, op, err := s.Save(ctx, Call{UserID: b.userID, RequestID: idleRequestID("save"), Box: b.id})
	if err != nil {
		s.log.Info("boxes: idle box not saved", "box", b.id, "err", err)
		return
	}
	last, err := s.WaitOperation(ctx, b.userID, op.ID, nil)
	if err != nil {
		return // the api is closing; recovery finishes the save
	}
	if last.Phase != controlv1.Phase_PHASE_DONE {
		s.log.Warn("boxes: idle box's save failed; hibernating it", "box", b.id, "operation", op.ID, "err", last.Error)
	}
	// A client that came during the save keeps the box up.
	if err := s.flushCalls(ctx); err != nil {
		return
	}
	if len(s.idleBoxes(ctx, b.id)) == 0 {
		s.log.Info("boxes: idle box stays up: a client came during its save", "box", b.id)
		return
	}
	s.idleHibernate(ctx, b, "no client call; saved")
}

// offloadCommand is what the idle check runs in a user's box, as the
// box's user through the login shell as Session.Exec runs a command.
var offloadCommand = []string{"cocoonbox-agent", "offload", "status"}

// offloadWorking says whether `cocoonbox-agent offload status` lists a
// session working in b. An image without the command, or a box whose
// inbox is not up, has none; no answer within offloadAnswerWithin is an
// error.
func (s *Service) offloadWorking(ctx context.Context, b idleBox) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, offloadAnswerWithin)
	defer cancel()
	box, err := findBox(ctx, s.pool, b.userID, b.id, false)
	if err != nil {
		return false, err
	}
	sup, err := s.supervisor(box.Host)
	if err != nil {
		return false, err
	}
	p, err := sup.Exec(ctx, b.id, sandbox.ExecRequest{Args: offloadCommand, User: "user", Login: true})
	if err != nil {
		return false, supervisorError(err)
	}
	p.Stdin().Close()
	type answer struct {
		out []byte
		err error
	}
	done := make(chan answer, 1)
	go func() {
		go io.Copy(io.Discard, p.Stderr())
		out, _ := io.ReadAll(io.LimitReader(p.Stdout(), 1<<20))
		_, _ = io.Copy(io.Discard, p.Stdout())
		st, err := p.Wait()
		if err == nil && st.Code == 127 {
			err = errNoCommand
		}
		done <- answer{out, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		return false, fmt.Errorf("offload status: no answer within %s", offloadAnswerWithin)
	}
	if errors.Is(a.err, errNoCommand) {
		return false, nil
	}
	if a.err != nil {
		return false, a.err
	}
	var st struct {
		OK       bool `json:"ok"`
		Sessions []struct {
			Status string `json:"status"`
		} `json:"sessions"`
	}
	if json.Unmarshal(a.out, &st) != nil || !st.OK {
		return false, nil // the inbox is not up: no session works
	}
	for _, x := range st.Sessions {
		if x.Status == "working" {
			return true, nil
		}
	}
	return false, nil
}

// errNoCommand: the image has no cocoonbox-agent (the shell's 127).
var errNoCommand = errors.New("no such command")
