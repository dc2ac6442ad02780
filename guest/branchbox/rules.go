package branchbox

import (
	"errors"
	"fmt"
)

// Rule names one promise of the contract (BranchBox managed runtime
// manifest) that an assignment can break. Every refusal carries exactly one,
// so an operator can grep the contract, the README and the tests for it.
type Rule string

// The rules. The comment names the contract section each one serves.
const (
	// Managed runtime manifest v2: a versioned assignment, parsed strictly.
	RuleStrictJSON  Rule = "strict-json"
	RuleVersion     Rule = "version"
	RuleRequired    Rule = "required-field"
	RuleSyntax      Rule = "field-syntax"
	RuleVersionGate Rule = "version-gated-field"

	// Managed runtime manifest v2: the three identities.
	RuleScope               Rule = "lease-scope"
	RuleLeaseID             Rule = "lease-id"
	RuleExecutable          Rule = "executable"
	RuleV1Allowlist         Rule = "v1-provider-allowlist"
	RuleOneExecutable       Rule = "one-executable-per-consumer"
	RuleEnvironmentName     Rule = "environment-name"
	RuleExpiry              Rule = "lease-expiry"
	RuleMaterializationKind Rule = "materialization-fields"

	// Preloaded service images.
	RuleServiceImage   Rule = "immutable-image-reference"
	RulePortProxyImage Rule = "port-proxy-image"
	RulePublishedPorts Rule = "published-ports"
	// The repository's Dev Container inputs (package devcontainer):
	// service_images binds exactly the runnable Compose services, read
	// from literal, self-contained files.
	RuleServiceBinding    Rule = "service-image-binding"
	RuleDevcontainer      Rule = "devcontainer-config"
	RuleComposeFile       Rule = "compose-file"
	RuleIndirectInclude   Rule = "indirect-compose-include"
	RuleInterpolatedValue Rule = "interpolated-value"
	// The Compose allow-list: a key (or a value of one) a managed launch
	// does not allow, for a service that runs (package devcontainer).
	RuleComposeKey Rule = "compose-key"
	// Preloaded service images: every assigned image is present in the
	// local engine before the Dev Containers CLI runs.
	RuleLocalImage Rule = "local-image-inspect"
	// Security contract: the final Docker inspection of the primary
	// container (mounts, seccomp) and its provider user (id -u is the
	// signed consumer_uid, never root). Any difference tears down.
	RuleFinalInspection Rule = "final-inspection"
	RuleProviderUser    Rule = "provider-user"

	// The request envelope (toolrequest/envelope.go): terminal, never retryable.
	RuleRequestEnvelope     Rule = "request-envelope"
	RuleRequestCapability   Rule = "request-capability"
	RuleResponseCorrelation Rule = "response-correlation"
	// Request spools (toolrequest/claim.go and beside it): a request file's type, owner, mode,
	// links, size and the spool's quotas. Terminal.
	RuleRequestFile  Rule = "request-file"
	RuleRequestQuota Rule = "request-quota"
	// A spool volume BranchBox initializes must be fresh and empty.
	RuleRequestSpool Rule = "request-spool"
	// The dispatcher's replay record (toolrequest/replay.go). Terminal.
	RuleReplay Rule = "replay-claim"
	// The relay's framing (toolrequest/relay.go). Terminal.
	RuleFraming Rule = "relay-framing"

	// Version 3 workspace delegation.
	RuleWorkspaceConsumer Rule = "workspace-consumer"
	RuleManagedLaunch     Rule = "managed-launch-version-3"

	// Security contract: where assignments and sources live.
	RuleRunDirectory      Rule = "run-directory"
	RuleOwnerOnly         Rule = "owner-only-regular-file"
	RuleSibling           Rule = "materialization-sibling"
	RuleDigest            Rule = "materialization-digest"
	RuleSourceOutsideRun  Rule = "source-outside-run"
	RuleSourceType        Rule = "source-ownership-or-type"
	RuleOverlappingSource Rule = "overlapping-sources"
	RuleTargetNamespace   Rule = "target-lease-namespace"
	RuleOverlappingTarget Rule = "overlapping-targets"
	RuleAmbientPath       Rule = "ambient-authority-path"
	RuleValueFile         Rule = "value-file"
	RuleToolRequest       Rule = "tool-request-link"

	// Managed runtime manifest v2: shared Git metadata before checkout.
	RuleGitMetadata    Rule = "shared-git-metadata"
	RuleReuse          Rule = "no-reuse"
	RuleWorkspacePlace Rule = "workspace-place"
	RuleProvider       Rule = "provider-lease-match"
	RuleForce          Rule = "teardown-force"
)

// ErrRefused is wrapped by every *RuleError: errors.Is(err, ErrRefused)
// tells a refusal of the assignment from an I/O failure.
var ErrRefused = errors.New("assignment refused")

// RuleError is one refusal: the Rule broken, where (a JSON path such as
// "leases[2].materializations[0].source_path", or a file path), and why.
type RuleError struct {
	Rule   Rule
	Where  string
	Detail string
}

func (e *RuleError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("%s [rule %s]", e.Detail, e.Rule)
	}
	return fmt.Sprintf("%s: %s [rule %s]", e.Where, e.Detail, e.Rule)
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RuleError) Unwrap() error { return ErrRefused }

// Refuse builds a *RuleError; detail is a fmt format.
func Refuse(rule Rule, where, detail string, args ...any) *RuleError {
	return &RuleError{Rule: rule, Where: where, Detail: fmt.Sprintf(detail, args...)}
}

// RuleOf returns the Rule of the first *RuleError in err's chain, or "".
func RuleOf(err error) Rule {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule
	}
	return ""
}
