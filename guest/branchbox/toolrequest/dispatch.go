// The dispatcher (dispatch.go) is BranchBox's tool-request dispatcher (Contract:
// BranchBox managed runtime manifest, the dispatcher and replay: "moves the
// request into the root-only staging directory and keeps it there until an
// owner-only replay record ... is durable. It serializes each request ID
// with a process-crash-safe advisory lock, then relays one newline-delimited
// JSON frame followed by write-side EOF. It validates and durably caches
// the correlated response before idempotently writing the consumer
// response file."). It puts packages spool, envelope, replay and relay
// together in that order; a process killed at any step and run again
// resumes from what is durable.

package toolrequest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// Step names a point the dispatcher has durably passed, for Spool.Trace.
type Step string

// The steps, in order.
const (
	StepClaimed   Step = "claimed"   // the request is in .processing/, re-checked
	StepRecorded  Step = "recorded"  // the replay record is durable, the staged file removed
	StepRelaying  Step = "relaying"  // a relay to the endpoint starts
	StepCached    Step = "cached"    // the validated response is durable in the record
	StepResponded Step = "responded" // responses/<id>.json exists
)

// ErrRetryLater wraps a transport failure a signed exact replay may retry
// and the wait window ended before it could: retryable (exit 75).
var ErrRetryLater = errors.New("the endpoint could not be reached within the wait window")

// Spool is one tool-request lease's spool as the dispatcher uses it.
type Spool struct {
	// Dir is the spool volume's root as the engine holds it on the host.
	Dir string
	// Binding is what requests must match (its RequestID is set per call)
	// with the capability from the signed materialization.
	Binding     Binding
	ConsumerUID uint32
	// Endpoint is the linked tool-endpoint lease's socket as the run
	// recorded it (dialled through a descriptor, relay.go).
	Endpoint Endpoint
	// Policy is the lease's replay_policy ("" or exact-digest-replay-v1).
	Policy string
	// Ledger is the replay ledger directory (Dir).
	Ledger string
	// RelayTimeout bounds one relay (Security contract: time-bounded).
	RelayTimeout time.Duration
	// Trace, when set, is told each step once it is durable (the command
	// logs them to the journal).
	Trace func(Step) `json:"-"`
}

// Result is a successful dispatch.
type Result struct {
	Status    string `json:"status"`
	RequestID string `json:"request_id"`
	// Response is responses/<id>.json below Dir.
	Response string `json:"response"`
	// Cached says the response came from the replay record, without
	// contacting the endpoint.
	Cached bool `json:"cached"`
}

// Dispatch handles request id within wait (an id that is not a request
// id, [A-Za-z0-9][A-Za-z0-9_.-]{0,127}, is refused first, rule
// field-syntax, nothing opened): it resumes a staged or
// recorded claim, else waits (inotify) for requests/<id>.json to be
// finalized and claims it. Errors: ErrNotPending when none arrived
// in time, ErrRetryLater (both retryable); every refusal (file, envelope,
// capability, changed request, unsigned replay, framing, correlation) a
// terminal *branchbox.RuleError; otherwise I/O. On any error nothing is
// written to responses/.
//
// The wait window bounds the wait for the request and the retries of a
// signed exact replay; each relay itself is bounded by s.RelayTimeout
// alone, so a short window never cuts a relay that has started (without
// the policy that would block the claim for good).
func Dispatch(ctx context.Context, s *Spool, id string, wait time.Duration) (*Result, error) {
	// Every file name below is made from id: one grammar, checked here
	// and not only on the command line.
	if err := branchbox.CheckArguments(branchbox.Argument{Flag: "request id", Field: "request_id", Value: id}); err != nil {
		return nil, err
	}
	window, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	b := s.Binding
	b.RequestID = id
	unlock, err := lockRequest(s.Ledger, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	req, rec, err := s.claim(window, b)
	if err != nil {
		return nil, err
	}
	res := &Result{Status: "dispatched", RequestID: id, Response: s.Dir + "/" + responsesDir + "/" + id + ".json"}
	if rec.Response != nil {
		res.Cached = true
	} else if err := s.relay(ctx, window, req, rec); err != nil {
		return nil, err
	}
	if err := respond(s.Dir, id, rec.Response, s.ConsumerUID); err != nil {
		return nil, err
	}
	s.trace(StepResponded)
	return res, nil
}

// claim returns the request and its durable replay record: from a staged
// file a killed dispatcher left, else from a new finalized request, else
// (nothing pending) from the record alone.
func (s *Spool) claim(ctx context.Context, b Binding) (*Request, *Record, error) {
	data, err := readStaged(s.Dir, b.RequestID, s.ConsumerUID)
	if err != nil {
		return nil, nil, err
	}
	if data == nil {
		rec, err := lookupRecord(s.Ledger, b.RequestID)
		if err != nil {
			return nil, nil, err
		}
		pending, err := isPending(s.Dir, b.RequestID)
		if err != nil {
			return nil, nil, err
		}
		if rec != nil && !pending {
			return s.fromRecord(rec)
		}
		if err := waitFinalized(ctx, s.Dir, b.RequestID); err != nil {
			return nil, nil, err
		}
		if data, err = claimRequest(s.Dir, b.RequestID, s.ConsumerUID); err != nil {
			return nil, nil, err
		}
	}
	s.trace(StepClaimed)
	req, err := parseRequest(data, b)
	if err != nil {
		return nil, nil, err
	}
	rec, err := claimRecord(s.Ledger, req, s.Policy)
	if err != nil {
		return nil, nil, err
	}
	if err := unstage(s.Dir, b.RequestID); err != nil {
		return nil, nil, err
	}
	s.trace(StepRecorded)
	return req, rec, nil
}

// fromRecord resumes from a record alone (its staged file already gone):
// claimRecord decides as for a new same-id request.
func (s *Spool) fromRecord(rec *Record) (*Request, *Record, error) {
	var req Request
	if err := json.Unmarshal(rec.Request, &req); err != nil {
		return nil, nil, fmt.Errorf("replay record: %w", err)
	}
	rec, err := claimRecord(s.Ledger, &req, s.Policy)
	if err != nil {
		return nil, nil, err
	}
	return &req, rec, nil
}

// relay sends the request and caches the validated response in rec. A
// transport failure is retried only under exact-digest-replay-v1, while
// window lasts; without the policy it blocks the claim for good.
func (s *Spool) relay(ctx, window context.Context, req *Request, rec *Record) error {
	frame := req.Frame(s.Binding.Capability)
	for {
		s.trace(StepRelaying)
		line, err := relayFrame(ctx, s.Endpoint, frame, s.RelayTimeout)
		if err == nil {
			if _, err := parseResponse(line, req); err != nil {
				return err
			}
			if err := storeResponse(s.Ledger, req.RequestID, rec, line); err != nil {
				return err
			}
			s.trace(StepCached)
			return nil
		}
		if !errors.Is(err, errTransport) {
			return err
		}
		if s.Policy != branchbox.ReplayExactDigest {
			return branchbox.Refuse(branchbox.RuleReplay, req.RequestID, "the relay failed and the lease does not sign %s; the claim stays blocked (the side effect may have happened): %v", branchbox.ReplayExactDigest, err)
		}
		// A short back-off before the retry: nothing to wait on but time.
		select {
		case <-window.Done():
			return fmt.Errorf("request %s: %w: %v", req.RequestID, ErrRetryLater, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Spool) trace(step Step) {
	if s.Trace != nil {
		s.Trace(step)
	}
}
