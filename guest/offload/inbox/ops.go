package inbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// MaxSessions is how many sessions of the box may be not stopped at once
// (Contract: Offload, Preflight: three box sessions running).
const MaxSessions = 3

// BackInstruction is put first in the message of send --back (Contract:
// Offload, Inbox: "back puts the BACK instruction first"): stop, commit,
// write the hand-over to handoverPath and post --back.
func BackInstruction(handoverPath string) string {
	return "BACK: the user wants this task back now. Stop at a safe point, commit your work " +
		"(never push), write your hand-over to " + handoverPath + " and run " +
		"`cocoonbox-agent offload post --back < " + handoverPath + "`."
}

// send stores a message and starts, pastes or queues it (Contract:
// Offload, Inbox: send).
func (s *Server) send(req *offload.Request) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Store.EnsureRepo(req.Repo); err != nil {
		return nil, err
	}
	msgs, err := s.Store.Messages(req.Repo)
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" {
		for _, m := range msgs {
			if m.RequestID == req.RequestID {
				return map[string]any{"seq": m.Seq, "delivery": deliveryOf(m)}, nil
			}
		}
	}
	se := s.sessions[req.Repo]
	running := se != nil && se.Status != offload.StatusStopped
	if req.Start {
		if running {
			return nil, offload.Errorf(offload.CodeRefused, "repo %s already has a running %s session (%s)", req.Repo, se.CLI, se.Status)
		}
		if n := s.runningLocked(); n >= MaxSessions {
			return nil, offload.Errorf(offload.CodeRefused, "%d box sessions are not stopped; at most %d may run", n, MaxSessions)
		}
	} else if !running {
		return nil, offload.Errorf(offload.CodeRefused, "repo %s has no running session", req.Repo)
	}
	m := offload.Message{RequestID: req.RequestID, OffloadID: req.OffloadID, Body: req.Body,
		Start: req.Start, Back: req.Back, Interrupt: req.Interrupt, State: offload.MsgQueued, TimeMs: nowMs()}
	if !req.Start && m.OffloadID == "" {
		m.OffloadID = se.OffloadID
	}
	if req.Back {
		m.Body = BackInstruction(filepath.Join(s.Store.Paths.Repo(req.Repo), "handover.md")) + "\n\n" + req.Body
		m.Body = strings.TrimRight(m.Body, "\n")
		// A BACK still queued is dropped: this one replaces it.
		for _, old := range msgs {
			if old.Back && old.State == offload.MsgQueued {
				old.State = offload.MsgDropped
				if err := s.Store.SaveMessage(req.Repo, old); err != nil {
					return nil, err
				}
			}
		}
	}
	if m, err = s.Store.AddMessage(req.Repo, m); err != nil {
		return nil, err
	}
	if req.Start {
		if err := s.startLocked(req.Repo, req.Name, req.CLI, m); err != nil {
			return nil, err
		}
		return map[string]any{"seq": m.Seq, "delivery": "started"}, nil
	}
	// An interrupt waits while the session is starting: the CLI has not
	// taken its first prompt, and what is typed into it then is lost (the
	// real claude dropped the Esc and the paste's first character and never
	// submitted it). The first prompt's taking delivers it
	// (setStatusLocked).
	switch {
	case req.Interrupt && se.Status != offload.StatusStarting:
		if err := s.interruptLocked(se, &m); err != nil {
			return nil, err
		}
	case idle(se.Status):
		if err := s.pasteLocked(se, &m); err != nil {
			return nil, err
		}
	}
	return map[string]any{"seq": m.Seq, "delivery": deliveryOf(m)}, nil
}

func deliveryOf(m offload.Message) string {
	switch {
	case m.Start:
		return "started"
	case m.State == offload.MsgQueued || m.State == offload.MsgDropped:
		return "queued"
	}
	return "pasted"
}

// idle says whether a session takes a paste now: it waits at its prompt.
func idle(status string) bool {
	return status == offload.StatusIdle || status == offload.StatusBlocked || status == offload.StatusWaitingForUser
}

func (s *Server) runningLocked() int {
	n := 0
	for _, se := range s.sessions {
		if se.Status != offload.StatusStopped {
			n++
		}
	}
	return n
}

// post adds an outbox entry (Contract: Offload, Inbox: post). The verb
// has checked the hand-over already; the inbox checks again, so no client
// can put a broken back into the outbox.
func (s *Server) post(req *offload.Request) (map[string]any, error) {
	if req.Kind != "question" {
		if err := offload.CheckHandover(req.Body); err != nil {
			return nil, offload.Errorf(offload.CodeRefused, "%v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Store.EnsureRepo(req.Repo); err != nil {
		return nil, err
	}
	e := offload.Entry{Kind: req.Kind, TimeMs: nowMs(), Body: req.Body, OffloadID: req.OffloadID}
	se := s.sessions[req.Repo]
	if se != nil {
		e.CLI = se.CLI
		if e.OffloadID == "" {
			e.OffloadID = se.OffloadID
		}
	}
	e, err := s.Store.AddEntry(req.Repo, e, req.RequestID)
	if err != nil {
		return nil, err
	}
	ev := WatchEvent{Repo: req.Repo, Entry: e.Kind, Seq: e.Seq, OffloadID: e.OffloadID, CLI: e.CLI}
	if se != nil {
		ev.Name, ev.Status = se.Name, se.Status
	}
	s.notifyLocked(ev)
	return map[string]any{"seq": e.Seq}, nil
}

// read returns the outbox entries after since, waiting up to wait_ms for
// one when there is none yet.
func (s *Server) read(ctx context.Context, req *offload.Request) (map[string]any, error) {
	deadline := time.Now().Add(time.Duration(req.WaitMs) * time.Millisecond)
	for {
		s.mu.Lock()
		entries, err := s.Store.Entries(req.Repo, req.Since)
		status := ""
		if se := s.sessions[req.Repo]; se != nil {
			status = se.Status
		}
		changed := s.changed
		left := time.Until(deadline)
		done := err != nil || len(entries) > 0 || left <= 0
		if !done {
			s.parked++
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if done {
			if entries == nil {
				entries = []offload.Entry{}
			}
			return map[string]any{"entries": entries, "status": status}, nil
		}
		timer := time.NewTimer(left)
		var stopping bool
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			stopping = true
		}
		timer.Stop()
		s.mu.Lock()
		s.parked--
		s.mu.Unlock()
		if stopping {
			return nil, offload.Errorf(offload.CodeFailed, "the inbox is stopping")
		}
	}
}

// SessionStatus is one line of the status op and verb (Contract:
// Offload, status): Copy is the copy state (absent, mirror, unreturned,
// busy); the *Ms fields are Unix milliseconds, 0 for never; HooksSilent
// says the transcript moved while no hook ever reported (a managed setting
// turned them off); InboxSeq and OutboxSeq are the last seq of each.
type SessionStatus struct {
	Repo              string `json:"repo"`
	Name              string `json:"name"`
	CLI               string `json:"cli"`
	OffloadID         string `json:"offload_id"`
	Status            string `json:"status"`
	Copy              string `json:"copy"`
	TmuxAlive         bool   `json:"tmux_alive"`
	HookAtMs          int64  `json:"hook_at_ms"`
	HooksSilent       bool   `json:"hooks_silent"`
	TranscriptMtimeMs int64  `json:"transcript_mtime_ms"`
	WindowActivityMs  int64  `json:"window_activity_ms"`
	InboxSeq          int64  `json:"inbox_seq"`
	OutboxSeq         int64  `json:"outbox_seq"`
}

func (s *Server) status(repo string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []SessionStatus{}
	for key, se := range s.sessions {
		if repo != "" && key != repo {
			continue
		}
		st := SessionStatus{Repo: key, Name: se.Name, CLI: se.CLI, OffloadID: se.OffloadID,
			Status: se.Status, HookAtMs: se.HookAtMs}
		st.Copy, _ = s.Store.CopyState(key)
		if st.TmuxAlive = s.tm.alive(se.Tmux); st.TmuxAlive {
			_, st.WindowActivityMs, _ = s.tm.pane(se.Tmux)
		}
		st.TranscriptMtimeMs = s.transcriptMtime(se)
		// Hooks that never reported while the transcript moved are blocked
		// by a managed setting (allowManagedHooksOnly, disableAllHooks).
		st.HooksSilent = se.Status != offload.StatusStopped && se.HookAtMs == 0 && st.TranscriptMtimeMs > se.StartedAtMs
		if msgs, err := s.Store.Messages(key); err == nil && len(msgs) > 0 {
			st.InboxSeq = msgs[len(msgs)-1].Seq
		}
		if es, err := s.Store.Entries(key, 0); err == nil && len(es) > 0 {
			st.OutboxSeq = es[len(es)-1].Seq
		}
		out = append(out, st)
	}
	return map[string]any{"sessions": out, "parked": s.parked}, nil
}

// event applies a hook's report (Contract: Offload, Box CLI in tmux: the
// claude hooks and codex's notify).
func (s *Server) event(req *offload.Request) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[req.Repo]
	if se == nil || se.CLI != req.CLI {
		return nil, offload.Errorf(offload.CodeRefused, "repo %s has no %s session", req.Repo, req.CLI)
	}
	var payload struct {
		Reason         string `json:"reason"`
		TranscriptPath string `json:"transcript_path"`
	}
	if len(req.Payload) > 0 {
		json.Unmarshal(req.Payload, &payload)
	}
	if se.Status == offload.StatusStopped || (req.RequestID != "" && slices.Contains(se.Events, req.RequestID)) {
		return map[string]any{}, nil
	}
	next := se.Status
	switch req.Hook {
	case "UserPromptSubmit":
		next = offload.StatusWorking
		s.promptAt[req.Repo] = nowMs()
	case "Stop", "StopFailure", "notify":
		next = s.idleOrBlockedLocked(se)
	case "Notification":
		if se.Status != offload.StatusBlocked {
			next = offload.StatusWaitingForUser
		}
	case "SessionEnd":
		if payload.Reason != "clear" {
			next = offload.StatusStopped
		}
	default:
		return nil, offload.Errorf(offload.CodeInvalid, "unknown hook %q for %s", req.Hook, req.CLI)
	}
	se.HookAtMs = nowMs()
	if req.RequestID != "" {
		se.Events = append(se.Events, req.RequestID)
		se.Events = se.Events[max(0, len(se.Events)-offload.MaxSessionEvents):]
	}
	if payload.TranscriptPath != "" && filepath.IsAbs(payload.TranscriptPath) {
		se.Transcript = payload.TranscriptPath
	}
	if err := s.setStatusLocked(se, next); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

// idleOrBlockedLocked: a turn that ended with a question in the outbox
// (posted after the last message it got) leaves the session blocked on
// the user's answer; else idle.
func (s *Server) idleOrBlockedLocked(se *offload.Session) string {
	es, err := s.Store.Entries(se.Repo, 0)
	if err != nil || len(es) == 0 {
		return offload.StatusIdle
	}
	last := es[len(es)-1]
	if last.Kind != "question" || last.OffloadID != se.OffloadID {
		return offload.StatusIdle
	}
	msgs, _ := s.Store.Messages(se.Repo)
	for _, m := range msgs {
		if m.State == offload.MsgDelivered && m.TimeMs > last.TimeMs {
			return offload.StatusIdle
		}
	}
	return offload.StatusBlocked
}

func fileMtimeMs(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixMilli()
}
