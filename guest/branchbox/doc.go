// Package branchbox is the BranchBox managed runtime manifest: the
// orchestrator-owned, versioned assignment (versions 1, 2 and 3), parsed
// strictly and validated fail-closed (Contract: BranchBox managed runtime
// manifest v2, whole: the three identities, preloaded service images, the
// shared-directory, tool-endpoint and tool-request leases, the security
// contract).
//
// Parse checks everything the bytes alone can show; the load subpackage
// adds the rules about the files on disk (owners, modes, digests), checked
// on opened descriptors. Every refusal is a *RuleError naming its Rule and
// where. The schema is documented field by field in README.md beside this
// file; testdata/assignment-v3.json is a complete, valid version 3 example.
package branchbox
