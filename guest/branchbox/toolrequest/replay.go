// The replay ledger (replay.go) is the dispatcher's replay ledger (Contract: BranchBox
// managed runtime manifest, the dispatcher: "an owner-only replay record
// containing the capability-stripped canonical request and SHA-256
// fingerprint is durable" before the relay; "Replay is denied by
// default"; exact-digest-replay-v1). One record per request id in
// <state>/<run_id>/replay/<lease_id>/, which teardown removes with the
// state directory.

package toolrequest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// Record is what the ledger keeps of one request id: the canonical
// request, its fingerprint, and once validated the correlated response.
type Record struct {
	Fingerprint string          `json:"fingerprint"`
	Request     json.RawMessage `json:"request"`
	Response    json.RawMessage `json:"response,omitempty"`
}

// Dir is the replay ledger of one tool-request lease.
func ReplayDir(root, runID, leaseID string) string {
	return filepath.Join(rundir.StateDir(root, runID), "replay", leaseID)
}

// lockRequest serializes one request id across processes with an exclusive
// flock on dir/<id>.lock (created 0600). The kernel drops it when the
// holder dies, so a SIGKILLed dispatcher never leaves the id locked.
// The returned func releases it. An id that is not a request id is
// refused (rule field-syntax) before any file is made.
func lockRequest(dir, id string) (func(), error) {
	// The lock's file name is made here, so the id is held here to the
	// one request-id grammar: "../escaped" named a file beside the ledger.
	if err := branchbox.CheckArguments(branchbox.Argument{Flag: "request id", Field: "request_id", Value: id}); err != nil {
		return nil, err
	}
	// The state directory is root-only (ledger), so its chain is made
	// plainly; the ledger directory itself is then opened without symlinks.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("replay ledger %s: %w", dir, err)
	}
	dfd, err := rundir.OpenPath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("replay ledger %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, id+".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("replay lock %s: %w", id, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("replay lock %s: %w", id, err)
	}
	return func() { unix.Close(fd) }, nil
}

// claimRecord records req under its id, or checks it against the record
// already there, and returns the record to act on (hold lockRequest meanwhile):
//   - no record: the new one is written durably (rundir.WriteFile) before
//     claimRecord returns, so the relay may start;
//   - another fingerprint: a changed same-id request, terminal;
//   - a cached response: returned, the endpoint is not contacted again;
//   - no response (an earlier relay was interrupted): with policy
//     exact-digest-replay-v1 the persisted request may be retried; without
//     it the claim stays blocked, terminal, since the side effect may
//     already have happened.
//
// Refusals are *branchbox.RuleError (rule replay-claim).
func claimRecord(dir string, req *Request, policy string) (*Record, error) {
	prev, err := lookupRecord(dir, req.RequestID)
	if err != nil {
		return nil, err
	}
	if prev == nil {
		rec := &Record{Fingerprint: req.Fingerprint(), Request: req.Canonical()}
		return rec, store(dir, req.RequestID, rec)
	}
	switch {
	case prev.Fingerprint != req.Fingerprint():
		return nil, branchbox.Refuse(branchbox.RuleReplay, req.RequestID, "changed since its first claim (fingerprint %s, now %s); a changed same-id request is terminal", prev.Fingerprint, req.Fingerprint())
	case prev.Response != nil:
		return prev, nil
	case policy != branchbox.ReplayExactDigest:
		return nil, branchbox.Refuse(branchbox.RuleReplay, req.RequestID, "was relayed before without a cached response and the lease does not sign %s; the claim stays blocked", branchbox.ReplayExactDigest)
	}
	return prev, nil
}

// storeResponse caches a validated response in rec durably, before the
// consumer's response file is written.
func storeResponse(dir, id string, rec *Record, response []byte) error {
	rec.Response = append(json.RawMessage(nil), response...)
	return store(dir, id, rec)
}

// store writes rec byte-exact (marshalEnvelope): json.Marshal would
// rewrite '&', '<' and '>' in the raw response as \u0026..., so a cached
// answer holding one (a URL with '&') differed from the consumer's
// response file and its exact re-dispatch was refused.
func store(dir, id string, rec *Record) error {
	data, err := marshalEnvelope(rec)
	if err != nil {
		return err
	}
	if err := rundir.WriteFile(dir, id+".json", data); err != nil {
		return fmt.Errorf("replay record %s: %w", id, err)
	}
	return nil
}

// lookupRecord reads the record of id (dir/<id>.json, opened without following
// symlinks); none is nil, nil. A record that is not JSON is an error.
func lookupRecord(dir, id string) (*Record, error) {
	fd, err := rundir.OpenPath(filepath.Join(dir, id+".json"), unix.O_RDONLY)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay record %s: %w", id, err)
	}
	f := os.NewFile(uintptr(fd), id)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 2*MaxRequest+4096))
	if err != nil {
		return nil, fmt.Errorf("replay record %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("replay record %s: corrupt: %w", id, err)
	}
	return &rec, nil
}
