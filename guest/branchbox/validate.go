package branchbox

import (
	"fmt"
	"regexp"
	"slices"
	"time"
)

var (
	runIDRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	leaseIDRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	consumerRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	instanceRe = regexp.MustCompile(`^[!-~]{1,128}$`)
	commitRe   = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)
	sha256Re   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// A bare executable name, looked up in the fixed safe PATH only.
	executableRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$`)
	fileNameRe   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// Validate checks every rule an assignment can be held to without looking
// at the file system (Contract: Managed runtime manifest v2, Preloaded
// service images, Security contract); Load adds the rules about the files.
// Parse calls it; call it directly only on an Assignment built in Go.
//
// Errors: the first broken rule, as a *RuleError naming the JSON path.
func Validate(a *Assignment, opt Options) error {
	if a.Version != "1" && a.Version != "2" && a.Version != "3" {
		return Refuse(RuleVersion, "version", "%q is not a supported version (\"1\", \"2\", \"3\")", a.Version)
	}
	if err := validateRun(a); err != nil {
		return err
	}
	if err := validateWorkspace(a); err != nil {
		return err
	}
	if err := validatePorts(a); err != nil {
		return err
	}
	if err := validateImages(a); err != nil {
		return err
	}
	return validateLeases(a, opt)
}

// ValidRunID reports whether id is a run id: [a-z0-9][a-z0-9-]{0,62}.
func ValidRunID(id string) bool { return runIDRe.MatchString(id) }

func validateRun(a *Assignment) error {
	if !runIDRe.MatchString(a.RunID) {
		return Refuse(RuleSyntax, "run_id", "%q must match %s", a.RunID, runIDRe)
	}
	if !runIDRe.MatchString(a.Feature) {
		return Refuse(RuleSyntax, "feature", "%q must match %s", a.Feature, runIDRe)
	}
	if a.OuterRuntime == nil {
		return Refuse(RuleRequired, "outer_runtime", "is missing")
	}
	if !runIDRe.MatchString(a.OuterRuntime.Kind) {
		return Refuse(RuleSyntax, "outer_runtime.kind", "%q must match %s", a.OuterRuntime.Kind, runIDRe)
	}
	if !instanceRe.MatchString(a.OuterRuntime.Instance) {
		return Refuse(RuleSyntax, "outer_runtime.instance", "must be 1-128 printable ASCII characters without space")
	}
	if a.Repository == nil {
		return Refuse(RuleRequired, "repository", "is missing")
	}
	if err := checkHostPath("repository.path", a.Repository.Path); err != nil {
		return err
	}
	if !commitRe.MatchString(a.Repository.Base) {
		return Refuse(RuleSyntax, "repository.base", "%q must be a full commit id (40 or 64 lowercase hex)", a.Repository.Base)
	}
	if reason := checkBranch(a.Branch); reason != "" {
		return Refuse(RuleSyntax, "branch", "%q %s", a.Branch, reason)
	}
	if a.Leases == nil {
		return Refuse(RuleRequired, "leases", "is missing (an empty list is allowed)")
	}
	return nil
}

func validateWorkspace(a *Assignment) error {
	w := a.Workspace
	if w == nil {
		return Refuse(RuleRequired, "workspace", "is missing")
	}
	if err := checkHostPath("workspace.path", w.Path); err != nil {
		return err
	}
	if within(w.Path, a.Repository.Path) || within(a.Repository.Path, w.Path) {
		return Refuse(RuleSyntax, "workspace.path", "%s overlaps repository.path %s", w.Path, a.Repository.Path)
	}
	hasUID, hasGID := w.ConsumerUID != nil, w.ConsumerGID != nil
	switch {
	case a.Version == "1" && (hasUID || hasGID):
		return Refuse(RuleVersionGate, "workspace.consumer_uid", "version 1 has no workspace consumer")
	case a.Version == "3" && !hasUID:
		return Refuse(RuleWorkspaceConsumer, "workspace.consumer_uid", "version 3 requires a distinct non-root workspace consumer")
	case a.Version == "3" && !hasGID:
		return Refuse(RuleWorkspaceConsumer, "workspace.consumer_gid", "version 3 requires the workspace consumer's group")
	case hasUID != hasGID:
		return Refuse(RuleWorkspaceConsumer, "workspace", "consumer_uid and consumer_gid go together")
	}
	if hasUID && (*w.ConsumerUID == 0 || *w.ConsumerGID == 0) {
		return Refuse(RuleWorkspaceConsumer, "workspace.consumer_uid", "the workspace consumer must not be root (uid and gid 0 are refused)")
	}
	return nil
}

func validatePorts(a *Assignment) error {
	hosts, runtimes := map[uint16]bool{}, map[uint16]bool{}
	for i, p := range a.PublishedPorts {
		where := at("published_ports", i)
		if p.Host == 0 || p.Runtime == 0 {
			return Refuse(RulePublishedPorts, where, "ports are 1-65535")
		}
		if hosts[p.Host] || runtimes[p.Runtime] {
			return Refuse(RulePublishedPorts, where, "host port %d or runtime port %d is published twice", p.Host, p.Runtime)
		}
		hosts[p.Host], runtimes[p.Runtime] = true, true
	}
	return nil
}

// validateImages: Contract: Preloaded service images.
func validateImages(a *Assignment) error {
	if a.Version == "1" && (a.ServiceImages != nil || a.PortProxyImage != "") {
		return Refuse(RuleVersionGate, "service_images", "preloaded service images need version 2 or 3")
	}
	names := make([]string, 0, len(a.ServiceImages))
	for name := range a.ServiceImages {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		where := "service_images." + name
		if !serviceRe.MatchString(name) {
			return Refuse(RuleServiceImage, where, "%q is not a Compose service name (%s)", name, serviceRe)
		}
		if reason := CheckImageReference(a.ServiceImages[name]); reason != "" {
			return Refuse(RuleServiceImage, where, "%q %s", a.ServiceImages[name], reason)
		}
	}
	if a.PortProxyImage != "" {
		if reason := CheckImageReference(a.PortProxyImage); reason != "" {
			return Refuse(RulePortProxyImage, "port_proxy_image", "%q %s", a.PortProxyImage, reason)
		}
	}
	if len(a.ServiceImages) > 0 && len(a.PublishedPorts) > 0 && a.PortProxyImage == "" {
		return Refuse(RulePortProxyImage, "port_proxy_image", "preloaded service mode publishes ports, so port_proxy_image is required")
	}
	return nil
}

// ManagedLaunchError says why the assignment cannot launch a managed Dev
// Container, or nil (Contract: Managed runtime manifest v2, first
// paragraph): version 3, a workspace consumer, a complete non-empty
// service_images map, and a port proxy image when ports are published.
// It is checked before any CLI preflight.
func ManagedLaunchError(a *Assignment) error {
	switch {
	case a.Version != "3":
		return Refuse(RuleManagedLaunch, "version", "managed Dev Containers launches require version 3; this is version %s", a.Version)
	case a.Workspace == nil || a.Workspace.ConsumerUID == nil:
		return Refuse(RuleManagedLaunch, "workspace.consumer_uid", "managed launches require a distinct non-root workspace consumer")
	case len(a.ServiceImages) == 0:
		return Refuse(RuleManagedLaunch, "service_images", "managed launches require a complete immutable service_images map")
	case len(a.PublishedPorts) > 0 && a.PortProxyImage == "":
		return Refuse(RuleManagedLaunch, "port_proxy_image", "published ports require port_proxy_image")
	}
	return nil
}

func validateLeases(a *Assignment, opt Options) error {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	runDir := opt.RunDir(a.RunID)
	ids := map[string]int{}
	for i := range a.Leases {
		l := &a.Leases[i]
		where := at("leases", i)
		if !leaseIDRe.MatchString(l.LeaseID) {
			return Refuse(RuleLeaseID, where+".lease_id", "%q must match %s", l.LeaseID, leaseIDRe)
		}
		if j, dup := ids[l.LeaseID]; dup {
			return Refuse(RuleLeaseID, where+".lease_id", "%q is also leases[%d]'s id", l.LeaseID, j)
		}
		ids[l.LeaseID] = i
		if !consumerRe.MatchString(l.Consumer) {
			return Refuse(RuleSyntax, where+".consumer", "%q must match %s", l.Consumer, consumerRe)
		}
		exp, err := time.Parse(time.RFC3339, l.ExpiresAt)
		if err != nil {
			return Refuse(RuleExpiry, where+".expires_at", "%q is not an RFC 3339 time", l.ExpiresAt)
		}
		if !opt.SkipExpiry && !exp.After(now) {
			return Refuse(RuleExpiry, where+".expires_at", "lease %s expired at %s", l.LeaseID, exp.UTC().Format(time.RFC3339))
		}
		if l.Materializations == nil {
			return Refuse(RuleRequired, where+".materializations", "is missing (an empty list is allowed)")
		}
		if err := validateLease(a, l, where, runDir); err != nil {
			return err
		}
	}
	if err := validateConsumers(a); err != nil {
		return err
	}
	if err := validateLinks(a, ids); err != nil {
		return err
	}
	return validateOverlaps(a)
}

// validateLease holds one lease to its scope's fields.
func validateLease(a *Assignment, l *Lease, where, runDir string) error {
	switch l.Scope {
	case ScopeModelIdentity, ScopeProviderEnvironment:
	case ScopeSharedDirectory, ScopeToolEndpoint, ScopeToolRequest:
		if a.Version == "1" {
			return Refuse(RuleVersionGate, where+".scope", "scope %s needs version 2 or 3", l.Scope)
		}
	default:
		return Refuse(RuleScope, where+".scope", "%q is not a lease scope (model-identity, provider-environment, shared-directory, tool-endpoint, tool-request)", l.Scope)
	}
	model := l.Scope == ScopeModelIdentity
	request := l.Scope == ScopeToolRequest
	switch {
	case !model && l.Executable != "":
		return Refuse(RuleExecutable, where+".executable", "only a model-identity lease names an executable")
	case !model && l.InheritedEnvironment != nil:
		return Refuse(RuleMaterializationKind, where+".inherited_environment", "only a model-identity lease inherits environment")
	case !request && (l.ConsumerUID != nil || l.EndpointLeaseID != "" || l.RequestSpoolTarget != "" || l.ReplayPolicy != ""):
		return Refuse(RuleMaterializationKind, where, "consumer_uid, endpoint_lease_id, request_spool_target and replay_policy belong to tool-request leases")
	}
	if model {
		if err := validateModel(a, l, where); err != nil {
			return err
		}
	}
	if request {
		if err := validateRequest(l, where); err != nil {
			return err
		}
	}
	for j := range l.Materializations {
		if err := validateMaterialization(l, &l.Materializations[j], at(where+".materializations", j), runDir); err != nil {
			return err
		}
	}
	return nil
}

func validateModel(a *Assignment, l *Lease, where string) error {
	if !executableRe.MatchString(l.Executable) {
		return Refuse(RuleExecutable, where+".executable", "%q must be a bare program name (%s), found only in the fixed safe PATH", l.Executable, executableRe)
	}
	if a.Version == "1" && !slices.Contains(V1Providers, l.Executable) {
		return Refuse(RuleV1Allowlist, where+".executable", "%q is not on version 1's provider allowlist %v", l.Executable, V1Providers)
	}
	seen := map[string]bool{}
	for k, name := range l.InheritedEnvironment {
		w := at(where+".inherited_environment", k)
		if reason := CheckEnvironmentName(name); reason != "" {
			return Refuse(RuleEnvironmentName, w, "%q %s", name, reason)
		}
		if seen[name] {
			return Refuse(RuleEnvironmentName, w, "%q is listed twice", name)
		}
		seen[name] = true
	}
	if len(l.Materializations) != 0 {
		return Refuse(RuleMaterializationKind, where+".materializations", "a model-identity lease has no materializations")
	}
	return nil
}

func validateRequest(l *Lease, where string) error {
	if l.ConsumerUID == nil || *l.ConsumerUID == 0 {
		return Refuse(RuleToolRequest, where+".consumer_uid", "a tool-request needs a non-root consumer_uid")
	}
	if l.EndpointLeaseID == "" {
		return Refuse(RuleToolRequest, where+".endpoint_lease_id", "a tool-request names its linked tool-endpoint lease")
	}
	if l.ReplayPolicy != "" && l.ReplayPolicy != ReplayExactDigest {
		return Refuse(RuleToolRequest, where+".replay_policy", "%q is not a replay policy (only %q; omit it to deny replay)", l.ReplayPolicy, ReplayExactDigest)
	}
	if err := checkTarget(where+".request_spool_target", l.RequestSpoolTarget, ScopeToolRequest); err != nil {
		return err
	}
	if len(l.Materializations) != 1 {
		return Refuse(RuleToolRequest, where+".materializations", "a tool-request has exactly one materialization, its capability file")
	}
	if t := l.Materializations[0].TargetPath; t != l.RequestSpoolTarget+"/.capability" {
		return Refuse(RuleToolRequest, where+".materializations[0].target_path", "%q must be %s/.capability", t, l.RequestSpoolTarget)
	}
	return nil
}

func validateMaterialization(l *Lease, m *Materialization, where, runDir string) error {
	file := IsFileScope(l.Scope)
	switch {
	case file && !sha256Re.MatchString(m.SHA256):
		return Refuse(RuleDigest, where+".sha256", "a file materialization needs its SHA-256 as 64 lowercase hex digits")
	case !file && m.SHA256 != "":
		return Refuse(RuleMaterializationKind, where+".sha256", "only file materializations (provider-environment, tool-request) carry a digest")
	case l.Scope == ScopeProviderEnvironment && m.TargetPath != "":
		return Refuse(RuleMaterializationKind, where+".target_path", "provider-environment values are never mounted, so they have no target")
	case l.Scope == ScopeProviderEnvironment && m.EnvironmentName == "":
		return Refuse(RuleRequired, where+".environment_name", "a provider-environment value names its variable")
	case l.Scope != ScopeProviderEnvironment && m.EnvironmentName != "":
		return Refuse(RuleMaterializationKind, where+".environment_name", "only provider-environment values have an environment_name")
	case l.Scope != ScopeProviderEnvironment && m.TargetPath == "":
		return Refuse(RuleRequired, where+".target_path", "is missing")
	}
	if m.EnvironmentName != "" {
		if reason := CheckEnvironmentName(m.EnvironmentName); reason != "" {
			return Refuse(RuleEnvironmentName, where+".environment_name", "%q %s", m.EnvironmentName, reason)
		}
	}
	if err := checkSource(where+".source_path", m.SourcePath, runDir, file); err != nil {
		return err
	}
	if m.TargetPath != "" {
		return checkTarget(where+".target_path", m.TargetPath, l.Scope)
	}
	return nil
}

// validateConsumers: one executable per consumer, and unambiguous variables.
func validateConsumers(a *Assignment) error {
	model := map[string]int{}
	env := map[string]map[string]string{} // consumer -> name -> where it came from
	bind := func(consumer, name, where string) error {
		if env[consumer] == nil {
			env[consumer] = map[string]string{}
		}
		if prev, dup := env[consumer][name]; dup {
			return Refuse(RuleEnvironmentName, where, "%s is already bound for consumer %s by %s", name, consumer, prev)
		}
		env[consumer][name] = where
		return nil
	}
	for i, l := range a.Leases {
		where := at("leases", i)
		switch l.Scope {
		case ScopeModelIdentity:
			if j, dup := model[l.Consumer]; dup {
				return Refuse(RuleOneExecutable, where, "consumer %s is already bound to executable %s by leases[%d]; one consumer has one model-identity lease", l.Consumer, a.Leases[j].Executable, j)
			}
			model[l.Consumer] = i
			for k, name := range l.InheritedEnvironment {
				if err := bind(l.Consumer, name, at(where+".inherited_environment", k)); err != nil {
					return err
				}
			}
		case ScopeProviderEnvironment:
			for k, m := range l.Materializations {
				if err := bind(l.Consumer, m.EnvironmentName, at(where+".materializations", k)+".environment_name"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// validateLinks: a tool-request names one tool-endpoint lease of the same
// consumer, and no endpoint serves two spools.
func validateLinks(a *Assignment, ids map[string]int) error {
	linked := map[string]int{}
	for i, l := range a.Leases {
		if l.Scope != ScopeToolRequest {
			continue
		}
		where := at("leases", i) + ".endpoint_lease_id"
		j, ok := ids[l.EndpointLeaseID]
		if !ok || a.Leases[j].Scope != ScopeToolEndpoint {
			return Refuse(RuleToolRequest, where, "%q is not a tool-endpoint lease of this assignment", l.EndpointLeaseID)
		}
		e := a.Leases[j]
		if e.Consumer != l.Consumer {
			return Refuse(RuleToolRequest, where, "endpoint %s belongs to consumer %s, not %s", e.LeaseID, e.Consumer, l.Consumer)
		}
		if len(e.Materializations) != 1 {
			return Refuse(RuleToolRequest, where, "a linked endpoint %s has exactly one socket materialization", e.LeaseID)
		}
		if k, dup := linked[l.EndpointLeaseID]; dup {
			return Refuse(RuleToolRequest, where, "endpoint %s is already linked to leases[%d]", e.LeaseID, k)
		}
		linked[l.EndpointLeaseID] = i
	}
	return nil
}

// validateOverlaps: Contract: Security contract ("overlapping sources");
// targets, spool targets included, may not overlap either.
func validateOverlaps(a *Assignment) error {
	type place struct{ path, where string }
	var sources, targets []place
	for i, l := range a.Leases {
		for j, m := range l.Materializations {
			w := at(at("leases", i)+".materializations", j)
			sources = append(sources, place{m.SourcePath, w + ".source_path"})
			if m.TargetPath != "" && !(l.Scope == ScopeToolRequest) {
				targets = append(targets, place{m.TargetPath, w + ".target_path"})
			}
		}
		if l.RequestSpoolTarget != "" {
			targets = append(targets, place{l.RequestSpoolTarget, at("leases", i) + ".request_spool_target"})
		}
	}
	for _, set := range []struct {
		rule  Rule
		what  string
		items []place
	}{{RuleOverlappingSource, "source", sources}, {RuleOverlappingTarget, "target", targets}} {
		for i, p := range set.items {
			for _, q := range set.items[:i] {
				if within(p.path, q.path) || within(q.path, p.path) {
					return Refuse(set.rule, p.where, "%s %s overlaps %s (%s)", set.what, p.path, q.path, q.where)
				}
			}
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || len(p) > len(dir) && p[:len(dir)] == dir && (p[len(dir)] == '/' || dir == "/")
}

// Summary is a one-line account of a lease for `check`'s output.
func (l *Lease) Summary() string {
	switch l.Scope {
	case ScopeModelIdentity:
		return fmt.Sprintf("%s may start %s for %s, inheriting %v", l.LeaseID, l.Executable, l.Consumer, l.InheritedEnvironment)
	case ScopeProviderEnvironment:
		names := make([]string, len(l.Materializations))
		for i, m := range l.Materializations {
			names[i] = m.EnvironmentName
		}
		return fmt.Sprintf("%s gives %s the values of %v", l.LeaseID, l.Consumer, names)
	case ScopeToolRequest:
		return fmt.Sprintf("%s spools %s's requests (uid %d) at %s to endpoint %s", l.LeaseID, l.Consumer, *l.ConsumerUID, l.RequestSpoolTarget, l.EndpointLeaseID)
	}
	return fmt.Sprintf("%s binds %d %s source(s) read-only for %s", l.LeaseID, len(l.Materializations), l.Scope, l.Consumer)
}

// Lease returns the lease of id, or nil.
func (a *Assignment) Lease(id string) *Lease {
	for i := range a.Leases {
		if a.Leases[i].LeaseID == id {
			return &a.Leases[i]
		}
	}
	return nil
}
