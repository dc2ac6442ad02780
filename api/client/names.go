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
	// ImageRef is an image a box boots: cbdesk:vN-TIER, N 1 to 999999,
	// TIER a lowercase word of at most 16 (api/sandbox reads it with this).
	ImageRef = regexp.MustCompile(`^cbdesk:v([1-9][0-9]{0,5})-([a-z][a-z0-9]{0,15})$`)
	// DeviceID is a device token's id, as api/devices makes them: dev_
	// and 16 lowercase hex digits (Contract: Browser sign-in and device
	// tokens).
	DeviceID = regexp.MustCompile(`^dev_[0-9a-f]{16}$`)
)

// The rules of BoxName, RequestID, ImageRef and DeviceID as the refusals
// state them, after the quoted input.
const (
	BoxNameRule   = "must be 1 to 63 of [a-z0-9-], start with a letter and not end with '-' (it is the box's hostname)"
	RequestIDRule = "must be 1 to 64 of [A-Za-z0-9_.:-], chosen by the caller and reused only for a retry"
	ImageRefRule  = "must be cbdesk:vN-TIER (N 1 to 999999, TIER a lowercase word), e.g. cbdesk:v1-desk"
	DeviceIDRule  = "must be dev_ and 16 hex digits, a device's id (cocoonbox devices lists them)"
)
