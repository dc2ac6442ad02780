package branchbox

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// testOptions checks leases against a fixed time, before the example's expiry.
var testOptions = Options{Root: Root, Now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}

func exampleBytes(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/assignment-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func exampleMap(t testing.TB) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(exampleBytes(t), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func lease(m map[string]any, i int) map[string]any {
	return m["leases"].([]any)[i].(map[string]any)
}

func mat(m map[string]any, i, j int) map[string]any {
	return lease(m, i)["materializations"].([]any)[j].(map[string]any)
}

const (
	digestA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	runDir  = "/run/branchbox/managed/run-demo"
)

func TestExampleV3IsValidAndCanLaunch(t *testing.T) {
	a, err := Parse(exampleBytes(t), testOptions)
	if err != nil {
		t.Fatalf("the README's version 3 example is refused: %v", err)
	}
	if err := ManagedLaunchError(a); err != nil {
		t.Fatalf("the version 3 example cannot launch: %v", err)
	}
	if len(a.Leases) != 5 || *a.Workspace.ConsumerUID != 1001 {
		t.Fatalf("parsed %+v", a)
	}
}

// TestHostileManifests: Contract: Managed runtime manifest v2, Preloaded
// service images, Security contract. Each hostile assignment is refused
// with the rule it broke and names where.
func TestHostileManifests(t *testing.T) {
	type mutate func(m map[string]any)
	set := func(f func(m map[string]any) map[string]any, key string, v any) mutate {
		return func(m map[string]any) { f(m)[key] = v }
	}
	top := func(m map[string]any) map[string]any { return m }
	l := func(i int) func(map[string]any) map[string]any {
		return func(m map[string]any) map[string]any { return lease(m, i) }
	}
	mt := func(i, j int) func(map[string]any) map[string]any {
		return func(m map[string]any) map[string]any { return mat(m, i, j) }
	}
	example := string(exampleBytes(t))
	cases := []struct {
		name  string
		edit  mutate
		raw   string
		rule  Rule
		where string
	}{
		{name: "version 4", edit: set(top, "version", "4"), rule: RuleVersion, where: "version"},
		{name: "version as a number", edit: set(top, "version", 3), rule: RuleVersion, where: "version"},
		{name: "version v3", edit: set(top, "version", "v3"), rule: RuleVersion, where: "version"},
		{name: "version empty", edit: set(top, "version", ""), rule: RuleVersion, where: "version"},
		{name: "version 3.0", edit: set(top, "version", "3.0"), rule: RuleVersion, where: "version"},
		{name: "version missing", edit: func(m map[string]any) { delete(m, "version") }, rule: RuleRequired, where: "version"},
		{name: "unknown top-level field", edit: set(top, "provider", "x"), rule: RuleStrictJSON, where: "provider"},
		{name: "unknown lease field", edit: set(l(0), "secret", "x"), rule: RuleStrictJSON, where: "secret"},
		{name: "duplicate key", raw: strings.Replace(example, `"run_id": "run-demo",`, `"run_id": "run-demo", "run_id": "run-other",`, 1), rule: RuleStrictJSON, where: "run_id"},
		{name: "duplicate service image", raw: strings.Replace(example, `"service_images": {`, `"service_images": {"app": "sha256:`+digestA+`",`, 1), rule: RuleStrictJSON, where: "service_images.app"},
		{name: "trailing data", raw: example + `{}`, rule: RuleStrictJSON, where: ""},
		{name: "trailing garbage", raw: example + `x`, rule: RuleStrictJSON, where: ""},
		{name: "null field", edit: set(top, "port_proxy_image", nil), rule: RuleStrictJSON, where: "port_proxy_image"},
		{name: "key in other case", raw: strings.Replace(example, `"run_id"`, `"RUN_ID"`, 1), rule: RuleStrictJSON, where: "RUN_ID"},
		{name: "key with Kelvin sign", raw: strings.Replace(example, `"kind"`, "\"\u212aind\"", 1), rule: RuleStrictJSON, where: "outer_runtime.Kind"},
		// Issue 38, Deliver 4: keys are byte-exact, so an escape that
		// decodes to a known key is refused (it was accepted as run_id).
		{name: "key run\\u005fid spelled with an escape", raw: strings.Replace(example, `"run_id"`, `"run\u005fid"`, 1), rule: RuleStrictJSON, where: "run_id"},
		{name: "nested key spelled with an escape", raw: strings.Replace(example, `"kind"`, `"k\u0069nd"`, 1), rule: RuleStrictJSON, where: "outer_runtime.kind"},
		{name: "top-level array", raw: "[" + example + "]", rule: RuleStrictJSON, where: ""},
		{name: "not UTF-8", raw: strings.Replace(example, "cb-0a1b2c3d", "cb-\xff", 1), rule: RuleStrictJSON, where: ""},
		{name: "tag-only service image", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "registry.example/team/app:1.0"), rule: RuleServiceImage, where: "service_images.app"},
		{name: "URL-shaped service image", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "https://registry.example/team/app@sha256:"+digestA), rule: RuleServiceImage, where: "service_images.app"},
		{name: "interpolated service image", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "${APP_IMAGE}"), rule: RuleServiceImage, where: "service_images.app"},
		{name: "interpolated digest", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "registry.example/team/app@sha256:${DIGEST}"), rule: RuleServiceImage, where: "service_images.app"},
		{name: "upper-case hex digest", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "registry.example/team/app@sha256:"+strings.ToUpper(digestA)), rule: RuleServiceImage, where: "service_images.app"},
		{name: "short digest", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "registry.example/team/app@sha256:"+digestA[1:]), rule: RuleServiceImage, where: "service_images.app"},
		{name: "sha512 digest", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "registry.example/team/app@sha512:"+digestA+digestA), rule: RuleServiceImage, where: "service_images.app"},
		{name: "image without registry", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "team/app@sha256:"+digestA), rule: RuleServiceImage, where: "service_images.app"},
		{name: "upper-case registry host", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "Registry.Example/team/app@sha256:"+digestA), rule: RuleServiceImage, where: "service_images.app"},
		{name: "upper-case port proxy registry", edit: set(top, "port_proxy_image", "REGISTRY.example:5000/runtime/tcp-proxy@sha256:"+digestA), rule: RulePortProxyImage, where: "port_proxy_image"},
		{name: "upper-case repository", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "app", "registry.example/Team/app@sha256:"+digestA), rule: RuleServiceImage, where: "service_images.app"},
		{name: "bad service name", edit: set(func(m map[string]any) map[string]any { return m["service_images"].(map[string]any) }, "-app", "sha256:"+digestA), rule: RuleServiceImage, where: "service_images.-app"},
		{name: "published ports without port proxy image", edit: func(m map[string]any) { delete(m, "port_proxy_image") }, rule: RulePortProxyImage, where: "port_proxy_image"},
		{name: "tag-only port proxy image", edit: set(top, "port_proxy_image", "registry.example/runtime/tcp-proxy:latest"), rule: RulePortProxyImage, where: "port_proxy_image"},
		{name: "port 0", edit: set(top, "published_ports", []any{map[string]any{"host": 0, "runtime": 3000}}), rule: RulePublishedPorts, where: "published_ports[0]"},
		{name: "negative port", edit: set(top, "published_ports", []any{map[string]any{"host": -1, "runtime": 3000}}), rule: RuleStrictJSON, where: "published_ports.host"},
		{name: "materialization outside the run directory", edit: set(mt(1, 0), "source_path", "/run/branchbox/managed/other-run/materializations/delivery-token"), rule: RuleSourceOutsideRun, where: "leases[1].materializations[0].source_path"},
		{name: "materialization with ..", edit: set(mt(1, 0), "source_path", runDir+"/materializations/../../other-run/materializations/x"), rule: RuleSourceOutsideRun, where: "leases[1].materializations[0].source_path"},
		{name: "materialization elsewhere on the host", edit: set(mt(1, 0), "source_path", "/home/user/.config/token"), rule: RuleSourceOutsideRun, where: "leases[1].materializations[0].source_path"},
		{name: "file materialization not in materializations/", edit: set(mt(1, 0), "source_path", runDir+"/delivery-token"), rule: RuleSibling, where: "leases[1].materializations[0].source_path"},
		{name: "file materialization nested in materializations/", edit: set(mt(1, 0), "source_path", runDir+"/materializations/sub/delivery-token"), rule: RuleSibling, where: "leases[1].materializations[0].source_path"},
		{name: "shared directory in materializations/", edit: set(mt(2, 0), "source_path", runDir+"/materializations/exchange"), rule: RuleSibling, where: "leases[2].materializations[0].source_path"},
		{name: "source is the assignment", edit: set(mt(2, 0), "source_path", runDir+"/assignment.json"), rule: RuleSourceOutsideRun, where: "leases[2].materializations[0].source_path"},
		{name: "LD_PRELOAD", edit: set(mt(1, 0), "environment_name", "LD_PRELOAD"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "GIT_DIR", edit: set(mt(1, 0), "environment_name", "GIT_DIR"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "BRANCHBOX_RUN_ID", edit: set(mt(1, 0), "environment_name", "BRANCHBOX_RUN_ID"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "DOCKER_HOST", edit: set(mt(1, 0), "environment_name", "DOCKER_HOST"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "BASH_ENV", edit: set(mt(1, 0), "environment_name", "BASH_ENV"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "lower-case name", edit: set(mt(1, 0), "environment_name", "token"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "overlong name", edit: set(mt(1, 0), "environment_name", strings.Repeat("A", 65)), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "inherited PATH", edit: set(l(0), "inherited_environment", []any{"PATH"}), rule: RuleEnvironmentName, where: "leases[0].inherited_environment[0]"},
		{name: "inherited NOTIFY_SOCKET", edit: set(l(0), "inherited_environment", []any{"NOTIFY_SOCKET"}), rule: RuleEnvironmentName, where: "leases[0].inherited_environment[0]"},
		{name: "one name bound twice for a consumer", edit: set(mt(1, 0), "environment_name", "MODEL_ACCESS_TOKEN"), rule: RuleEnvironmentName, where: "leases[1].materializations[0].environment_name"},
		{name: "expired lease", edit: set(l(1), "expires_at", "2026-11-30T00:00:00Z"), rule: RuleExpiry, where: "leases[1].expires_at"},
		{name: "expiry not RFC 3339", edit: set(l(1), "expires_at", "tomorrow"), rule: RuleExpiry, where: "leases[1].expires_at"},
		{name: "one consumer, two executables", edit: func(m map[string]any) {
			m["leases"] = append(m["leases"].([]any), map[string]any{"lease_id": "lease_model2", "scope": "model-identity",
				"consumer": "coding-agent", "executable": "other-cli", "expires_at": "2099-01-01T00:00:00Z", "materializations": []any{}})
		}, rule: RuleOneExecutable, where: "leases[5]"},
		{name: "executable is a path", edit: set(l(0), "executable", "/tmp/provider-cli"), rule: RuleExecutable, where: "leases[0].executable"},
		{name: "model-identity with a materialization", edit: set(l(0), "materializations", []any{map[string]any{"source_path": runDir + "/materializations/x", "sha256": digestA}}), rule: RuleMaterializationKind, where: "leases[0].materializations"},
		{name: "provider-environment value with a target", edit: set(mt(1, 0), "target_path", "/run/branchbox/leases/shared/token"), rule: RuleMaterializationKind, where: "leases[1].materializations[0].target_path"},
		{name: "missing digest", edit: func(m map[string]any) { delete(mat(m, 1, 0), "sha256") }, rule: RuleDigest, where: "leases[1].materializations[0].sha256"},
		{name: "target outside its namespace", edit: set(mt(2, 0), "target_path", "/run/branchbox/leases/tool-endpoints/exchange"), rule: RuleTargetNamespace, where: "leases[2].materializations[0].target_path"},
		{name: "target climbing out", edit: set(mt(2, 0), "target_path", "/run/branchbox/leases/shared/../../../var/run/docker.sock"), rule: RuleTargetNamespace, where: "leases[2].materializations[0].target_path"},
		{name: "target the namespace itself", edit: set(mt(2, 0), "target_path", "/run/branchbox/leases/shared"), rule: RuleTargetNamespace, where: "leases[2].materializations[0].target_path"},
		{name: "target naming the docker socket", edit: set(mt(3, 0), "target_path", "/run/branchbox/leases/tool-endpoints/docker.sock"), rule: RuleAmbientPath, where: "leases[3].materializations[0].target_path"},
		{name: "source naming the docker socket", edit: set(mt(3, 0), "source_path", runDir+"/tool-endpoints/docker.sock"), rule: RuleAmbientPath, where: "leases[3].materializations[0].source_path"},
		{name: "source component starting with a dot", edit: set(mt(2, 0), "source_path", runDir+"/shared/.ssh"), rule: RuleSourceOutsideRun, where: "leases[2].materializations[0].source_path"},
		{name: "overlapping sources", edit: set(mt(2, 0), "source_path", runDir+"/tool-endpoints"), rule: RuleOverlappingSource, where: "leases[3].materializations[0].source_path"},
		{name: "overlapping targets", edit: func(m map[string]any) {
			l := lease(m, 2)
			l["materializations"] = append(l["materializations"].([]any), map[string]any{"source_path": runDir + "/shared/other", "target_path": "/run/branchbox/leases/shared/exchange/inner"})
		}, rule: RuleOverlappingTarget, where: "leases[2].materializations[1].target_path"},
		{name: "workspace below /etc", edit: set(func(m map[string]any) map[string]any { return m["workspace"].(map[string]any) }, "path", "/etc/cron.d/x"), rule: RuleAmbientPath, where: "workspace.path"},
		{name: "relative repository", edit: set(func(m map[string]any) map[string]any { return m["repository"].(map[string]any) }, "path", "repos/app"), rule: RuleSyntax, where: "repository.path"},
		{name: "short base commit", edit: set(func(m map[string]any) map[string]any { return m["repository"].(map[string]any) }, "base", "0123abc"), rule: RuleSyntax, where: "repository.base"},
		{name: "branch with ..", edit: set(top, "branch", "feature/../main"), rule: RuleSyntax, where: "branch"},
		{name: "branch starting with -", edit: set(top, "branch", "-b"), rule: RuleSyntax, where: "branch"},
		{name: "v3 without a workspace consumer", edit: func(m map[string]any) { delete(m["workspace"].(map[string]any), "consumer_uid") }, rule: RuleWorkspaceConsumer, where: "workspace.consumer_uid"},
		{name: "v3 root workspace consumer", edit: set(func(m map[string]any) map[string]any { return m["workspace"].(map[string]any) }, "consumer_uid", 0), rule: RuleWorkspaceConsumer, where: "workspace.consumer_uid"},
		{name: "unknown scope", edit: set(l(2), "scope", "host-directory"), rule: RuleScope, where: "leases[2].scope"},
		{name: "duplicate lease id", edit: set(l(2), "lease_id", "lease_model"), rule: RuleLeaseID, where: "leases[2].lease_id"},
		{name: "tool-request as root", edit: set(l(4), "consumer_uid", 0), rule: RuleToolRequest, where: "leases[4].consumer_uid"},
		{name: "tool-request to another consumer's endpoint", edit: set(l(3), "consumer", "primary-tool"), rule: RuleToolRequest, where: "leases[4].endpoint_lease_id"},
		{name: "tool-request to a missing endpoint", edit: set(l(4), "endpoint_lease_id", "nothing"), rule: RuleToolRequest, where: "leases[4].endpoint_lease_id"},
		{name: "unknown replay policy", edit: set(l(4), "replay_policy", "always"), rule: RuleToolRequest, where: "leases[4].replay_policy"},
		{name: "capability outside its spool", edit: set(mt(4, 0), "target_path", "/run/branchbox/leases/tool-requests/other/.capability"), rule: RuleToolRequest, where: "leases[4].materializations[0].target_path"},
		{name: "v1 with service images", edit: func(m map[string]any) {
			m["version"] = "1"
			delete(m["workspace"].(map[string]any), "consumer_uid")
			delete(m["workspace"].(map[string]any), "consumer_gid")
		}, rule: RuleVersionGate, where: "service_images"},
		{name: "v2 lease field on a model lease", edit: set(l(0), "replay_policy", ReplayExactDigest), rule: RuleMaterializationKind, where: "leases[0]"},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d hostile manifests", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.raw)
			if c.edit != nil {
				m := exampleMap(t)
				c.edit(m)
				var err error
				if data, err = json.Marshal(m); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Parse(data, testOptions)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("not a refusal: %v", err)
			}
			if RuleOf(err) != c.rule {
				t.Fatalf("refused by rule %q, want %q: %v", RuleOf(err), c.rule, err)
			}
			// The field, exactly: a case refused by its rule at another
			// field (a case that no longer tests what it says) fails.
			var re *RuleError
			if !errors.As(err, &re) || re.Where != c.where {
				t.Fatalf("refused at %q, want %q: %v", re.Where, c.where, err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestVersion1: Contract: "Version 1 remains accepted ... and retains its
// original fixed provider allowlist."
func TestVersion1FixedProviderAllowlist(t *testing.T) {
	v1 := func(executable string) []byte {
		m := exampleMap(t)
		m["version"] = "1"
		delete(m, "service_images")
		delete(m, "port_proxy_image")
		delete(m["workspace"].(map[string]any), "consumer_uid")
		delete(m["workspace"].(map[string]any), "consumer_gid")
		m["leases"] = m["leases"].([]any)[:2]
		lease(m, 0)["executable"] = executable
		data, _ := json.Marshal(m)
		return data
	}
	a, err := Parse(v1("claude"), testOptions)
	if err != nil {
		t.Fatalf("version 1 with an allowed provider: %v", err)
	}
	if RuleOf(ManagedLaunchError(a)) != RuleManagedLaunch {
		t.Fatal("a version 1 assignment may launch a managed Dev Container")
	}
	if _, err := Parse(v1("provider-cli"), testOptions); RuleOf(err) != RuleV1Allowlist {
		t.Fatalf("version 1 with provider-cli: %v", err)
	}
}

// TestManagedLaunchRequiresVersion3: Contract: "Version 1/2 and
// no-consumer launches fail before CLI preflight."
func TestManagedLaunchRequiresVersion3(t *testing.T) {
	m := exampleMap(t)
	m["version"] = "2"
	delete(m["workspace"].(map[string]any), "consumer_uid")
	delete(m["workspace"].(map[string]any), "consumer_gid")
	data, _ := json.Marshal(m)
	a, err := Parse(data, testOptions)
	if err != nil {
		t.Fatalf("version 2 without a consumer parses for legacy recovery: %v", err)
	}
	if err := ManagedLaunchError(a); RuleOf(err) != RuleManagedLaunch {
		t.Fatalf("version 2 launch: %v", err)
	}
	m = exampleMap(t)
	delete(m, "service_images")
	delete(m, "port_proxy_image")
	data, _ = json.Marshal(m)
	if a, err = Parse(data, testOptions); err != nil {
		t.Fatal(err)
	}
	if err := ManagedLaunchError(a); RuleOf(err) != RuleManagedLaunch || !strings.Contains(err.Error(), "service_images") {
		t.Fatalf("launch without service_images: %v", err)
	}
}

func TestLocalImageDigestAccepted(t *testing.T) {
	for _, ref := range []string{"sha256:" + digestA, "registry.example:5000/team/app:1.2@sha256:" + digestA, "localhost/app@sha256:" + digestA} {
		if r := CheckImageReference(ref); r != "" {
			t.Errorf("%s: %s", ref, r)
		}
	}
}
