package boxes

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"

	"github.com/cocoonbox/cocoonbox/api/client"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// The kinds of refusal every Service call wraps, so the edges (the gRPC
// handler, the MCP) map them to their codes with errors.Is.
var (
	// ErrNotFound: no box of that id or name for this user (another
	// user's box is not found either).
	ErrNotFound = errors.New("no such box")
	// ErrNotRunning: Locate found the box, but it is not running.
	ErrNotRunning = errors.New("box not running")
	// ErrInvalid: an input breaks a rule (a *sandbox.InvalidError names
	// the field and the rule: one shape for every refusal of bad input,
	// the supervisor's and the api's).
	ErrInvalid = sandbox.ErrInvalid
	// ErrExists: the user has a box of that name already.
	ErrExists = errors.New("box exists")
	// ErrBusy: another operation is under way on the box.
	ErrBusy = errors.New("box mid-operation")
	// ErrState: the box is not in a state the call can start from, or the
	// call named a stale incarnation.
	ErrState = errors.New("wrong box state")
	// ErrLimit: max_boxes or the running limit is reached.
	ErrLimit = errors.New("limit reached")
	// ErrUnavailable: the supervisor holding the box cannot be reached.
	ErrUnavailable = errors.New("supervisor unavailable")
)

func invalid(field, format string, args ...any) error { return sandbox.Invalid(field, format, args...) }

var (
	boxIDRule = regexp.MustCompile(`^cb-[0-9a-f]{16}$`)
	opIDRule  = regexp.MustCompile(`^op-[0-9a-f]{16}$`)
)

// CheckName checks a box name: 1 to 63 of [a-z0-9-], starting with a
// letter and not ending with '-' (Contract: Box identity: the name is the
// box's hostname, so it is one hostname label; upper case is refused
// rather than folded, so the name a user gave is the hostname they see).
func CheckName(name string) error {
	if !client.BoxName.MatchString(name) {
		return invalid("name", "%q "+client.BoxNameRule, name)
	}
	return nil
}

// IsBoxID says whether s has a box id's shape ("cb-" and 16 hex digits).
func IsBoxID(s string) bool { return boxIDRule.MatchString(s) }

// checkRequestID checks a caller's request id (1 to 64 of [A-Za-z0-9_.:-]).
func checkRequestID(id string) error {
	if !client.RequestID.MatchString(id) {
		return invalid("request_id", "%q "+client.RequestIDRule, id)
	}
	return nil
}

// newID is prefix and 16 random lower-case hex digits.
func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
