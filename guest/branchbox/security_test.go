package branchbox

import (
	"encoding/json"
	"strings"
	"testing"
)

// refusedBy parses the example after edit and wants rule.
func refusedBy(t *testing.T, rule Rule, edit func(m map[string]any)) {
	t.Helper()
	m := exampleMap(t)
	edit(m)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data, testOptions)
	if RuleOf(err) != rule {
		t.Fatalf("refused by %q, want %q: %v", RuleOf(err), rule, err)
	}
	t.Log(err)
}

// Contract: Security contract, "File materializations are siblings below
// the assignment's materializations directory".
func TestSecurityContractFileMaterializationsAreSiblings(t *testing.T) {
	refusedBy(t, RuleSibling, func(m map[string]any) { mat(m, 4, 0)["source_path"] = runDir + "/capability" })
	refusedBy(t, RuleSibling, func(m map[string]any) { mat(m, 1, 0)["source_path"] = runDir + "/materializations/a/b" })
}

// Contract: "BranchBox rejects sources outside the manifest's run_id
// directory".
func TestSecurityContractSourcesOutsideTheRunDirectory(t *testing.T) {
	refusedBy(t, RuleSourceOutsideRun, func(m map[string]any) { mat(m, 2, 0)["source_path"] = "/srv/shared/exchange" })
	refusedBy(t, RuleSourceOutsideRun, func(m map[string]any) {
		mat(m, 3, 0)["source_path"] = "/run/branchbox/managed/run-demo2/tool-endpoints/delivery.sock"
	})
}

// Contract: "overlapping sources".
func TestSecurityContractOverlappingSources(t *testing.T) {
	refusedBy(t, RuleOverlappingSource, func(m map[string]any) { mat(m, 2, 0)["source_path"] = runDir + "/tool-endpoints" })
	refusedBy(t, RuleOverlappingSource, func(m map[string]any) {
		mat(m, 3, 0)["source_path"] = runDir + "/shared/exchange/inner.sock"
	})
}

// Contract: "targets outside the scope-specific BranchBox lease namespace".
func TestSecurityContractTargetsOutsideTheLeaseNamespace(t *testing.T) {
	refusedBy(t, RuleTargetNamespace, func(m map[string]any) { mat(m, 2, 0)["target_path"] = "/workspace/exchange" })
	refusedBy(t, RuleTargetNamespace, func(m map[string]any) {
		mat(m, 3, 0)["target_path"] = "/run/branchbox/leases/shared/delivery.sock"
	})
	refusedBy(t, RuleTargetNamespace, func(m map[string]any) {
		lease(m, 4)["request_spool_target"] = "/run/branchbox/leases/shared/delivery"
	})
}

// Contract: "ambient supervisor-authority or secret paths".
func TestSecurityContractAmbientAuthorityPaths(t *testing.T) {
	refusedBy(t, RuleAmbientPath, func(m map[string]any) {
		mat(m, 3, 0)["target_path"] = "/run/branchbox/leases/tool-endpoints/containerd.sock"
	})
	refusedBy(t, RuleAmbientPath, func(m map[string]any) { m["repository"].(map[string]any)["path"] = "/var/lib/docker/volumes/x" })
	refusedBy(t, RuleAmbientPath, func(m map[string]any) { m["workspace"].(map[string]any)["path"] = "/run/cocoonbox/ws" })
}

// Contract: "Environment names use bounded uppercase syntax and reject
// shell, loader, Git-control, container supervisor, and BranchBox control
// variables."
func TestSecurityContractEnvironmentNames(t *testing.T) {
	for name, family := range map[string]string{"PATH": "shell", "BASH_FUNC_X": "shell", "LD_LIBRARY_PATH": "loader",
		"NODE_OPTIONS": "loader", "GIT_SSH_COMMAND": "Git-control", "DOCKER_HOST": "container supervisor",
		"NOTIFY_SOCKET": "container supervisor", "BRANCHBOX_ROOT": "BranchBox control"} {
		if r := CheckEnvironmentName(name); r == "" || !contains(r, family) {
			t.Errorf("%s: %q, want a %s refusal", name, r, family)
		}
	}
	for _, name := range []string{"MODEL_ACCESS_TOKEN", "SOURCE_DELIVERY_TOKEN", "A", "X9_Y"} {
		if r := CheckEnvironmentName(name); r != "" {
			t.Errorf("%s refused: %s", name, r)
		}
	}
}

// Contract: "Provider-environment files are never mounted into the
// devcontainer": a value has no target.
func TestSecurityContractProviderEnvironmentNeverMounted(t *testing.T) {
	refusedBy(t, RuleMaterializationKind, func(m map[string]any) {
		mat(m, 1, 0)["target_path"] = "/run/branchbox/leases/shared/token"
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
