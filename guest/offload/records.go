package offload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Index is index.json: repo key → name (Contract: Offload, Directories).
type Index struct {
	V     int                   `json:"v"`
	Repos map[string]IndexEntry `json:"repos"`
}

// IndexEntry is one repo key's line of the index.
type IndexEntry struct {
	Name string `json:"name"`
}

// Copy is copy.json: which offload holds the copy and whether a CLI
// session started on it since the last end (Contract: Offload, Copy
// states: unreturned when one did).
type Copy struct {
	OffloadID string `json:"offload_id"`
	Kind      string `json:"kind"`
	// Unreturned is set when a CLI session starts and cleared by end.
	Unreturned bool `json:"unreturned"`
	// Base is S, the commit the copy must equal at send.
	Base string `json:"base,omitempty"`
}

// The session statuses (Contract: Offload, Box CLI in tmux). starting is
// ours: a session whose CLI has not taken its first prompt yet; it is busy.
const (
	StatusStarting       = "starting"
	StatusWorking        = "working"
	StatusIdle           = "idle"
	StatusBlocked        = "blocked"
	StatusWaitingForUser = "waiting_for_user"
	StatusStopped        = "stopped"
)

// Session is the session record, session.json: one CLI session of a repo
// in tmux (Tmux, cb-off-<repo key>-<kind>). Status is one of the Status*
// values; the *Ms times are Unix milliseconds.
type Session struct {
	Repo        string `json:"repo"`
	Name        string `json:"name"`
	CLI         string `json:"cli"`
	OffloadID   string `json:"offload_id"`
	Status      string `json:"status"`
	Tmux        string `json:"tmux"`
	StartedAtMs int64  `json:"started_at_ms"`
	// HookAtMs is when a hook last reported (0: never).
	HookAtMs int64 `json:"hook_at_ms"`
	// PanePID is the CLI's process (the pane's, since the shell execs it).
	PanePID int `json:"pane_pid"`
	// Transcript is the CLI's transcript file, once a hook named it.
	Transcript string `json:"transcript,omitempty"`
	// StartSeq is the inbox message that started the session.
	StartSeq int64 `json:"start_seq"`
	// Env is the session's tmux environment (NAME=value), kept so a
	// restart gives the new session the same; secrets are not in it, they
	// are read from the tmpfs again.
	Env []string `json:"env,omitempty"`
	// Events are the request ids of the last MaxSessionEvents hook reports
	// applied, oldest first, saved with the status they set: a report the
	// event verb sends again after a lost answer is answered, not applied
	// twice, also by an inbox that restarted in between.
	Events []string `json:"events,omitempty"`
}

// MaxSessionEvents is how many applied hook reports a session remembers:
// more than the reports that can come between a report and its resend
// (each hook waits for its own answer; the five claude hooks of one turn).
const MaxSessionEvents = 16

// The states of an inbox message. A paste is three steps (load the
// message into a tmux buffer named after it, paste it, Enter), and the
// state between them says after a crash which step is left: a pasting
// message whose buffer is gone was pasted and needs only its Enter.
const (
	MsgQueued    = "queued"
	MsgPasting   = "pasting"
	MsgPasted    = "pasted"
	MsgDelivered = "delivered"
	MsgDropped   = "dropped"
)

// Message is one inbox message, inbox/<seq>.json: Seq counts from 1 per
// repo, State is one of the Msg* states, TimeMs when it was stored (Unix
// milliseconds). Start marks a session's first prompt; Back and Interrupt
// are the send's flags; RequestID is the sending verb's (Request).
type Message struct {
	Seq       int64  `json:"seq"`
	RequestID string `json:"request_id,omitempty"`
	OffloadID string `json:"offload_id"`
	Body      string `json:"body"`
	Start     bool   `json:"start,omitempty"`
	Back      bool   `json:"back,omitempty"`
	Interrupt bool   `json:"interrupt,omitempty"`
	State     string `json:"state"`
	TimeMs    int64  `json:"time_ms"`
}

// Entry is one outbox entry as read returns it (Contract: Offload, read):
// Seq counts from 1 per repo, Kind is progress, question or back, TimeMs
// when it was posted (Unix milliseconds), CLI the session's kind.
type Entry struct {
	Seq       int64  `json:"seq"`
	Kind      string `json:"kind"`
	OffloadID string `json:"offload_id"`
	CLI       string `json:"cli"`
	TimeMs    int64  `json:"time_ms"`
	Body      string `json:"body"`
}

// storedEntry is an outbox file: the entry and the request id that made
// it, so a retried post returns the first one's seq instead of a copy.
type storedEntry struct {
	Entry
	RequestID string `json:"request_id,omitempty"`
}

// Store reads and writes the records under Paths.State.
type Store struct{ Paths Paths }

func (s Store) file(key, name string) string { return filepath.Join(s.Paths.Repo(key), name) }

// LoadIndex reads index.json; a missing one is empty.
func (s Store) LoadIndex() (Index, error) {
	idx := Index{V: 1, Repos: map[string]IndexEntry{}}
	err := ReadJSON(filepath.Join(s.Paths.State, "index.json"), &idx)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if idx.Repos == nil {
		idx.Repos = map[string]IndexEntry{}
	}
	return idx, err
}

// SaveIndex writes index.json.
func (s Store) SaveIndex(idx Index) error {
	if err := MkdirPrivate(s.Paths.State); err != nil {
		return err
	}
	return WriteJSON(filepath.Join(s.Paths.State, "index.json"), idx)
}

// EnsureRepo makes the repo's state directory and its inbox/, outbox/ and
// stage/ (0700).
func (s Store) EnsureRepo(key string) error {
	for _, d := range []string{s.Paths.State, s.Paths.Repo(key), s.file(key, "inbox"), s.file(key, "outbox"), s.file(key, "stage")} {
		if err := MkdirPrivate(d); err != nil {
			return err
		}
	}
	return nil
}

// LoadCopy reads copy.json; ok is false when there is none.
func (s Store) LoadCopy(key string) (c Copy, ok bool, err error) {
	err = ReadJSON(s.file(key, "copy.json"), &c)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	return c, err == nil, err
}

// SaveCopy writes copy.json.
func (s Store) SaveCopy(key string, c Copy) error { return WriteJSON(s.file(key, "copy.json"), c) }

// LoadSession reads session.json; nil when the repo never had a session.
func (s Store) LoadSession(key string) (*Session, error) {
	var se Session
	err := ReadJSON(s.file(key, "session.json"), &se)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &se, nil
}

// SaveSession writes session.json.
func (s Store) SaveSession(se *Session) error { return WriteJSON(s.file(se.Repo, "session.json"), se) }

// seqFiles lists dir's <seq>.json files in seq order.
func seqFiles(dir string) ([]int64, error) {
	names, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var seqs []int64
	for _, n := range names {
		base, ok := strings.CutSuffix(n.Name(), ".json")
		if !ok {
			continue
		}
		if seq, err := strconv.ParseInt(base, 10, 64); err == nil && seq > 0 {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

func seqName(dir string, seq int64) string {
	return filepath.Join(dir, fmt.Sprintf("%010d.json", seq))
}

// Messages reads the repo's inbox in seq order.
func (s Store) Messages(key string) ([]Message, error) {
	dir := s.file(key, "inbox")
	seqs, err := seqFiles(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(seqs))
	for _, seq := range seqs {
		var m Message
		if err := ReadJSON(seqName(dir, seq), &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// AddMessage stores m under the next seq and returns it.
func (s Store) AddMessage(key string, m Message) (Message, error) {
	dir := s.file(key, "inbox")
	seqs, err := seqFiles(dir)
	if err != nil {
		return m, err
	}
	m.Seq = 1
	if len(seqs) > 0 {
		m.Seq = seqs[len(seqs)-1] + 1
	}
	data, _ := json.Marshal(m)
	return m, CreateFile(seqName(dir, m.Seq), append(data, '\n'))
}

// SaveMessage rewrites an existing message (its state changed).
func (s Store) SaveMessage(key string, m Message) error {
	return WriteJSON(seqName(s.file(key, "inbox"), m.Seq), m)
}

// Entries reads the repo's outbox entries after seq since, in order, with
// the request ids that made them.
func (s Store) entries(key string, since int64) ([]storedEntry, error) {
	dir := s.file(key, "outbox")
	seqs, err := seqFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []storedEntry
	for _, seq := range seqs {
		if seq <= since {
			continue
		}
		var e storedEntry
		if err := ReadJSON(seqName(dir, seq), &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Entries reads the repo's outbox entries after seq since, in order.
func (s Store) Entries(key string, since int64) ([]Entry, error) {
	st, err := s.entries(key, since)
	out := make([]Entry, len(st))
	for i, e := range st {
		out[i] = e.Entry
	}
	return out, err
}

// AddEntry stores e under the next seq. A request id already in the outbox
// returns that entry instead: the post was accepted before and its answer
// lost, so it is not posted twice.
func (s Store) AddEntry(key string, e Entry, requestID string) (Entry, error) {
	all, err := s.entries(key, 0)
	if err != nil {
		return e, err
	}
	e.Seq = 1
	for _, old := range all {
		if requestID != "" && old.RequestID == requestID {
			return old.Entry, nil
		}
		e.Seq = old.Seq + 1
	}
	data, _ := json.Marshal(storedEntry{Entry: e, RequestID: requestID})
	return e, CreateFile(seqName(s.file(key, "outbox"), e.Seq), append(data, '\n'))
}

// CopyState is the copy's state (Contract: Offload, Copy states): absent
// (no index entry or no directory), busy (a session not stopped),
// unreturned (a session started since the last end), else mirror.
func (s Store) CopyState(key string) (string, error) {
	idx, err := s.LoadIndex()
	if err != nil {
		return "", err
	}
	ent, ok := idx.Repos[key]
	if !ok {
		return "absent", nil
	}
	if fi, err := os.Stat(s.Paths.Copy(ent.Name)); err != nil || !fi.IsDir() {
		return "absent", nil
	}
	se, err := s.LoadSession(key)
	if err != nil {
		return "", err
	}
	if se != nil && se.Status != StatusStopped {
		return "busy", nil
	}
	c, _, err := s.LoadCopy(key)
	if err != nil {
		return "", err
	}
	if c.Unreturned {
		return "unreturned", nil
	}
	return "mirror", nil
}
