package branchbox

// Assignment is the orchestrator-owned, versioned manifest BranchBox runs
// (Contract: Managed runtime manifest v2, and its version 1 and 3 rules).
// Its JSON form is the file's; docs/branchbox.md and this
// package's README.md document every field. Obtain one with Parse, which also validates it.
type Assignment struct {
	// Version is "1", "2" or "3", a JSON string.
	Version string `json:"version"`
	// RunID names the run: [a-z0-9][a-z0-9-]{0,62}. The assignment lives in
	// <managed>/<run_id>/assignment.json.
	RunID string `json:"run_id"`
	// Feature is the feature name the verbs take (`branchbox feature check
	// NAME`): [a-z0-9][a-z0-9-]{0,62}.
	Feature string `json:"feature"`
	// OuterRuntime names what BranchBox runs inside (kind and instance id).
	OuterRuntime *OuterRuntime `json:"outer_runtime"`
	// Repository is the fresh repository snapshot and the commit to start at.
	Repository *Repository `json:"repository"`
	// Branch is the new branch to create, a valid Git branch name.
	Branch string `json:"branch"`
	// Workspace is where the worktree is checked out, and in version 3 the
	// non-root consumer it is delegated to.
	Workspace *Workspace `json:"workspace"`
	// PublishedPorts are host:runtime TCP port pairs (1-65535 each).
	PublishedPorts []PublishedPort `json:"published_ports,omitempty"`
	// ServiceImages binds Compose service names to immutable image
	// references (version 2 and 3; Contract: Preloaded service images).
	ServiceImages map[string]string `json:"service_images,omitempty"`
	// PortProxyImage is the immutable image of the loopback port proxy.
	PortProxyImage string `json:"port_proxy_image,omitempty"`
	// Leases are the bindings of consumers to executables, values,
	// directories and endpoints.
	Leases []Lease `json:"leases"`
}

// OuterRuntime is the environment the assignment was made for.
type OuterRuntime struct {
	// Kind is [a-z0-9][a-z0-9-]{0,62}, e.g. "cocoonbox".
	Kind string `json:"kind"`
	// Instance is 1-128 printable ASCII characters without space, e.g. a box id.
	Instance string `json:"instance"`
}

// Repository is the repository snapshot a run starts from.
type Repository struct {
	// Path is the absolute, clean path of a Git repository (bare, or with
	// a .git directory) whose metadata the run shares.
	Path string `json:"path"`
	// Base is the full commit id (40 or 64 lowercase hex) the branch starts at.
	Base string `json:"base"`
}

// Workspace is where the run's worktree goes.
type Workspace struct {
	// Path is absolute and clean; it must not exist yet, its parent must.
	Path string `json:"path"`
	// ConsumerUID and ConsumerGID are the version 3 workspace consumer:
	// non-root, and distinct from the assignment's owner. Required in
	// version 3, optional in 2, refused in 1.
	ConsumerUID *uint32 `json:"consumer_uid,omitempty"`
	ConsumerGID *uint32 `json:"consumer_gid,omitempty"`
}

// PublishedPort is one published TCP port.
type PublishedPort struct {
	Host    uint16 `json:"host"`
	Runtime uint16 `json:"runtime"`
}

// Lease binds a consumer to one capability (Contract: Managed runtime
// manifest v2, "Version 2 separates three identities").
type Lease struct {
	LeaseID string `json:"lease_id"`
	// Scope is one of the Scope constants.
	Scope Scope `json:"scope"`
	// Consumer is an arbitrary name binding related leases.
	Consumer string `json:"consumer"`
	// Executable is the exact provider entrypoint (model-identity only).
	Executable string `json:"executable,omitempty"`
	// InheritedEnvironment names the caller's variables the provider
	// inherits (model-identity only).
	InheritedEnvironment []string `json:"inherited_environment,omitempty"`
	// ConsumerUID, EndpointLeaseID, RequestSpoolTarget and ReplayPolicy
	// belong to tool-request leases only.
	ConsumerUID        *uint32 `json:"consumer_uid,omitempty"`
	EndpointLeaseID    string  `json:"endpoint_lease_id,omitempty"`
	RequestSpoolTarget string  `json:"request_spool_target,omitempty"`
	ReplayPolicy       string  `json:"replay_policy,omitempty"`
	// ExpiresAt is an RFC 3339 time; an expired lease refuses the assignment.
	ExpiresAt string `json:"expires_at"`
	// Materializations are the files, directories and sockets of the lease.
	Materializations []Materialization `json:"materializations"`
}

// Materialization is one source in the run directory and where it goes.
type Materialization struct {
	SourcePath string `json:"source_path"`
	// TargetPath is the path in the container (directory and socket scopes,
	// the tool-request capability).
	TargetPath string `json:"target_path,omitempty"`
	// EnvironmentName is the variable a provider-environment value goes to.
	EnvironmentName string `json:"environment_name,omitempty"`
	// SHA256 is the lowercase hex digest of a file materialization.
	SHA256 string `json:"sha256,omitempty"`
}

// Scope is a lease's kind.
type Scope string

// The scopes (Contract: Managed runtime manifest v2).
const (
	ScopeModelIdentity       Scope = "model-identity"
	ScopeProviderEnvironment Scope = "provider-environment"
	ScopeSharedDirectory     Scope = "shared-directory"
	ScopeToolEndpoint        Scope = "tool-endpoint"
	ScopeToolRequest         Scope = "tool-request"
)

// ReplayExactDigest is the one replay policy a tool-request may opt into.
const ReplayExactDigest = "exact-digest-replay-v1"

// V1Providers is version 1's fixed provider allowlist: the only
// executables a version 1 model-identity lease may name.
var V1Providers = []string{"claude", "codex", "gemini"}

// Where things live (Contract: Security contract). Root is the default
// --root; the lease namespaces are container paths and never move.
const (
	Root           = "/run/branchbox"
	AssignmentFile = "assignment.json"
	// MaterializationsDir holds a run's file materializations, directly.
	MaterializationsDir = "materializations"
	LeaseNamespace      = "/run/branchbox/leases"
)

// TargetNamespace returns the scope-specific lease namespace a target must
// lie strictly below, or "" for scopes without targets.
func TargetNamespace(s Scope) string {
	switch s {
	case ScopeSharedDirectory:
		return LeaseNamespace + "/shared"
	case ScopeToolEndpoint:
		return LeaseNamespace + "/tool-endpoints"
	case ScopeToolRequest:
		return LeaseNamespace + "/tool-requests"
	}
	return ""
}

// IsFileScope reports whether the scope's materializations are
// digest-bound files in materializations/.
func IsFileScope(s Scope) bool {
	return s == ScopeProviderEnvironment || s == ScopeToolRequest
}
