package offload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// MaxRequest bounds one inbox request line: a message or hand-over (256
// KiB) and its JSON escaping fit with room to spare; a longer line is
// refused as invalid without being read into memory whole.
const MaxRequest = 2 << 20

// The inbox's error codes (Contract: Offload, Inbox).
const (
	CodeInvalid = "invalid"
	CodeRefused = "refused"
	CodeFailed  = "failed"
)

// Request is one inbox request (Contract: Offload, Inbox). RequestID is
// ours: a verb that retries after a lost answer sends the same id, and a
// send or post already stored under it is answered, not stored twice, an
// event already applied under it not applied again.
// Start on the env op is ours too: it starts the environment step.
type Request struct {
	Op        string          `json:"op"`
	Repo      string          `json:"repo,omitempty"`
	Name      string          `json:"name,omitempty"`
	CLI       string          `json:"cli,omitempty"`
	OffloadID string          `json:"offload_id,omitempty"`
	Body      string          `json:"body,omitempty"`
	Start     bool            `json:"start,omitempty"`
	Back      bool            `json:"back,omitempty"`
	Interrupt bool            `json:"interrupt,omitempty"`
	Kind      string          `json:"kind,omitempty"`
	Since     int64           `json:"since,omitempty"`   // read: entries after this seq
	WaitMs    int64           `json:"wait_ms,omitempty"` // read, env: the long-poll, in milliseconds
	Hook      string          `json:"hook,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
}

// Error is an inbox error answer: {"ok":false,"code","error"}.
type Error struct {
	Code string `json:"code"`
	Msg  string `json:"error"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

// Errorf makes an *Error with a code and a message.
func Errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// Wait limits, in milliseconds: read's long-poll (600 s) and env's (900 s).
const (
	MaxReadWaitMs = 600_000
	MaxEnvWaitMs  = 900_000
)

// ParseRequest parses one request line (without its newline) and checks it
// against the op's rules; a bad one is an *Error with code invalid that
// names the field and the rule.
func ParseRequest(line []byte) (*Request, error) {
	if len(line) > MaxRequest {
		return nil, Errorf(CodeInvalid, "request of %d bytes is over the limit of %d", len(line), MaxRequest)
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, Errorf(CodeInvalid, "a request is one JSON object on one line")
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&r); err != nil {
		return nil, Errorf(CodeInvalid, "request is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, Errorf(CodeInvalid, "a request is one JSON object; more follows it on the line")
	}
	needRepo := true
	switch r.Op {
	case "send":
		if r.Start {
			if err := CheckName(r.Name); err != nil {
				return nil, Errorf(CodeInvalid, "%v", err)
			}
			if err := CheckKind(r.CLI); err != nil {
				return nil, Errorf(CodeInvalid, "cli: %v", err)
			}
		}
		if r.Start && r.Body == "" {
			return nil, Errorf(CodeInvalid, "send with start needs the first prompt as body")
		}
	case "post":
		switch r.Kind {
		case "progress", "question", "back":
		default:
			return nil, Errorf(CodeInvalid, "post kind %q: must be progress, question or back", r.Kind)
		}
	case "read":
		if r.Since < 0 {
			return nil, Errorf(CodeInvalid, "since %d: must be 0 or more", r.Since)
		}
		if r.WaitMs < 0 || r.WaitMs > MaxReadWaitMs {
			return nil, Errorf(CodeInvalid, "wait_ms %d: must be 0 to %d", r.WaitMs, MaxReadWaitMs)
		}
	case "env":
		if r.WaitMs < 0 || r.WaitMs > MaxEnvWaitMs {
			return nil, Errorf(CodeInvalid, "wait_ms %d: must be 0 to %d", r.WaitMs, MaxEnvWaitMs)
		}
	case "restart":
	case "event":
		if err := CheckKind(r.CLI); err != nil {
			return nil, Errorf(CodeInvalid, "cli: %v", err)
		}
		if r.Hook == "" {
			return nil, Errorf(CodeInvalid, "event needs a hook name")
		}
		if len(r.Payload) > 0 && !json.Valid(r.Payload) {
			return nil, Errorf(CodeInvalid, "event payload is not JSON")
		}
	case "status":
		needRepo = r.Repo != ""
	case "rescan", "watch":
		needRepo = false
	case "":
		return nil, Errorf(CodeInvalid, "request has no op")
	default:
		return nil, Errorf(CodeInvalid, "unknown op %q", r.Op)
	}
	if needRepo {
		if err := CheckRepoKey(r.Repo); err != nil {
			return nil, Errorf(CodeInvalid, "%v", err)
		}
	}
	if r.OffloadID != "" {
		if err := CheckOffloadID(r.OffloadID); err != nil {
			return nil, Errorf(CodeInvalid, "%v", err)
		}
	}
	return &r, nil
}

// ErrInboxDown is a Call that could not reach the inbox, or lost it before
// the answer (the verbs' exit 4).
var ErrInboxDown = errors.New("the inbox is not running")

// Call sends one request to the inbox at socket and returns its answer
// line parsed into a map. An {"ok":false} answer is returned as an *Error
// (with the map); a socket it cannot connect to, write to or read a whole
// line from wraps ErrInboxDown, which a request with a RequestID may be
// sent again after. timeout bounds the whole call (the request's own wait
// included).
func Call(socket string, req *Request, timeout time.Duration) (map[string]any, error) {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w (%s: %v)", ErrInboxDown, socket, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(data, '\n')); err != nil {
		return nil, fmt.Errorf("%w (write to %s: %v)", ErrInboxDown, socket, err)
	}
	rd := bufio.NewReaderSize(conn, 64<<10)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%w (no answer from %s: %v)", ErrInboxDown, socket, err)
	}
	var resp map[string]any
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("inbox answer is not JSON: %w", err)
	}
	if ok, _ := resp["ok"].(bool); !ok {
		code, _ := resp["code"].(string)
		msg, _ := resp["error"].(string)
		return resp, &Error{Code: code, Msg: msg}
	}
	return resp, nil
}
