// Package toolrequest is BranchBox's tool-request protocol on the trusted
// side, one contract paragraph and one quota as files of one package
// (Contract: BranchBox managed runtime manifest, "Shared directory, tool
// endpoint, and request-spool leases", the dispatcher and replay, the
// Security contract's request-spool and relay lines): the spool a launch
// lays out and the dispatcher claims from (claim.go, init.go, respond.go,
// staged.go), the request and response envelopes (envelope.go), the
// replay ledger (replay.go), the relay to the endpoint socket (relay.go),
// and the dispatcher that puts them together in that order (dispatch.go).
// Each file's head comment says what its part does.
package toolrequest
