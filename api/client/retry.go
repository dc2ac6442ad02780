package client

import (
	"errors"

	"connectrpc.com/connect"
)

// RetryHint is the metadata key (an HTTP header on the wire) with which
// the api marks a refusal that may be made again as it is: a supervisor
// out of reach for now, an event stream to open again from the last seq.
// An answer without it is final, whatever its code: "this api has no box
// supervisor" is UNAVAILABLE too, and trying again cannot change it.
const RetryHint = "Retry-After"

// MayRetry marks err, an answer of the api, as one the caller may make
// again after a second (RetryHint), and answers it.
func MayRetry(err *connect.Error) *connect.Error {
	err.Meta().Set(RetryHint, "1")
	return err
}

// Unanswered says whether err is a call that got no answer from the api:
// the connection failed or the answer was lost on the way (not the
// caller's own cancel or deadline). Only such a call, or a refusal with
// RetryHint, is made again.
func Unanswered(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeCanceled, connect.CodeDeadlineExceeded:
		return false
	}
	return err != nil && !connect.IsWireError(err)
}

// Retryable says whether a call that failed with err may be made again
// unchanged: it got no answer (Unanswered), or the api said so
// (RetryHint).
func Retryable(err error) bool {
	if Unanswered(err) {
		return true
	}
	var ce *connect.Error
	return errors.As(err, &ce) && connect.IsWireError(err) && ce.Meta().Get(RetryHint) != ""
}
