package client

import "regexp"

// The grammars of the names a caller of Boxes picks, shared so that the
// CLI refuses a bad one before any call with the same rule the api
// states (api/boxes checks with these too). Contract: Box identity.
var (
	// BoxName is the hostname rule of Box identity in lower case: one RFC
	// 1123 label, 1 to 63 of [a-z0-9-], a letter first, not '-' last.
	BoxName = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// RequestID is a caller's request id: 1 to 64 of [A-Za-z0-9_.:-].
	RequestID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
)

// The rules of BoxName and RequestID as the refusals state them, after
// the quoted input.
const (
	BoxNameRule   = "must be 1 to 63 of [a-z0-9-], start with a letter and not end with '-' (it is the box's hostname)"
	RequestIDRule = "must be 1 to 64 of [A-Za-z0-9_.:-], chosen by the caller and reused only for a retry"
)
