package devcontainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

const goodConfig = `// JSONC, as the Dev Containers spec allows
{
  "dockerComposeFile": ["../compose.yaml", "compose.override.yaml"],
  "service": "app",
  "remoteUser": "dev",
  "workspaceFolder": "/workspace", // trailing comma next
}`

const goodCompose = `services:
  app:
    build: .
    environment:
      LITERAL: "costs $$5 and $${x}, it's"
  database:
    image: postgres:16
  tools:
    image: busybox
    profiles: [debug]
`

const goodOverride = `services:
  app:
    command: ["sleep", "infinity"]
`

const digestA = "registry.example/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
const digestB = "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"

// repo lays files out in a fresh repository directory and returns it.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func good() map[string]string {
	return map[string]string{
		".devcontainer/devcontainer.json":     goodConfig,
		"compose.yaml":                        goodCompose,
		".devcontainer/compose.override.yaml": goodOverride,
	}
}

// TestLoadLiteralRepository is the control case: a Compose-based JSONC
// configuration over two files loads, merged, with "$$" kept literal and
// the profile-gated service disabled (Contract: Preloaded service images).
func TestLoadLiteralRepository(t *testing.T) {
	in, err := Load(context.Background(), repo(t, good()))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(in.Config.ComposeFiles, ","); got != "compose.yaml,.devcontainer/compose.override.yaml" {
		t.Errorf("compose files %s", got)
	}
	app := in.Project.Services["app"]
	if v := app.Environment["LITERAL"]; v == nil || *v != "costs $$5 and $${x}, it's" {
		t.Errorf("environment value not kept literally: %v", v)
	}
	if len(app.Command) != 2 {
		t.Errorf("override not merged: %v", app.Command)
	}
	if _, ok := in.Project.DisabledServices["tools"]; !ok {
		t.Errorf("profile-gated service not disabled: %v", in.Project.ServiceNames())
	}
	if err := CheckServiceImages(map[string]string{"app": digestA, "database": digestB}, in.Project); err != nil {
		t.Errorf("complete binding refused: %v", err)
	}
}

// TestHostileRepositories: each input the contract refuses before
// startup is refused by its rule.
func TestHostileRepositories(t *testing.T) {
	cases := []struct {
		name  string
		edit  map[string]string // "" deletes
		rule  branchbox.Rule
		where string
	}{
		{"no configuration", map[string]string{".devcontainer/devcontainer.json": ""}, branchbox.RuleDevcontainer, "devcontainer.json"},
		{"two configurations", map[string]string{".devcontainer.json": `{"dockerComposeFile": "compose.yaml", "service": "app"}`}, branchbox.RuleDevcontainer, ".devcontainer.json"},
		{"not compose based", map[string]string{".devcontainer/devcontainer.json": `{"image": "debian"}`}, branchbox.RuleDevcontainer, "dockerComposeFile"},
		{"no service", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../compose.yaml"}`}, branchbox.RuleDevcontainer, "service"},
		{"unknown service", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../compose.yaml", "service": "web"}`}, branchbox.RuleDevcontainer, "service"},
		{"disabled runService", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../compose.yaml", "service": "app", "runServices": ["tools"]}`}, branchbox.RuleDevcontainer, "runServices[0]"},
		{"runArgs", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../compose.yaml", "service": "app", "runArgs": ["--privileged"]}`}, branchbox.RuleDevcontainer, "devcontainer.json: runArgs"},
		{"hostRequirements", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../compose.yaml", "service": "app", "hostRequirements": {"gpu": true}}`}, branchbox.RuleDevcontainer, "devcontainer.json: hostRequirements"},
		{"not JSON", map[string]string{".devcontainer/devcontainer.json": `{"service": `}, branchbox.RuleDevcontainer, "devcontainer.json"},
		{"devcontainer variable", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../compose.yaml", "service": "app", "containerEnv": {"T": "${localEnv:TOKEN}"}}`}, branchbox.RuleInterpolatedValue, "containerEnv.T"},
		{"compose file escapes", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "../../etc/compose.yaml", "service": "app"}`}, branchbox.RuleComposeFile, "dockerComposeFile[0]"},
		{"compose file absolute", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": "/etc/compose.yaml", "service": "app"}`}, branchbox.RuleComposeFile, "dockerComposeFile[0]"},
		{"compose file twice", map[string]string{".devcontainer/devcontainer.json": `{"dockerComposeFile": ["../compose.yaml", "../compose.yaml"], "service": "app"}`}, branchbox.RuleComposeFile, "dockerComposeFile[1]"},
		{"compose file missing", map[string]string{"compose.yaml": ""}, branchbox.RuleComposeFile, "compose.yaml"},
		{"include", map[string]string{"compose.yaml": "include:\n  - other.yaml\n" + goodCompose}, branchbox.RuleIndirectInclude, "compose.yaml: include"},
		{"extends file", map[string]string{".devcontainer/compose.override.yaml": "services:\n  app:\n    extends:\n      file: ../base.yaml\n      service: app\n"}, branchbox.RuleIndirectInclude, "services.app.extends"},
		{"env_file", map[string]string{".devcontainer/compose.override.yaml": "services:\n  app:\n    env_file: ../.env\n"}, branchbox.RuleIndirectInclude, "services.app.env_file"},
		{"secret file", map[string]string{".devcontainer/compose.override.yaml": "services:\n  app:\n    secrets: [key]\nsecrets:\n  key:\n    file: /etc/shadow\n"}, branchbox.RuleIndirectInclude, "secrets.key.file"},
		{"config environment", map[string]string{".devcontainer/compose.override.yaml": "configs:\n  c:\n    environment: TOKEN\n"}, branchbox.RuleIndirectInclude, "configs.c.environment"},
		{"interpolated image", map[string]string{".devcontainer/compose.override.yaml": "services:\n  database:\n    image: ${DB_IMAGE}\n"}, branchbox.RuleInterpolatedValue, "services.database.image"},
		{"interpolated bare dollar", map[string]string{".devcontainer/compose.override.yaml": "services:\n  app:\n    environment:\n      X: \"$$$HOME\"\n"}, branchbox.RuleInterpolatedValue, "services.app.environment.X"},
		{"interpolated key", map[string]string{".devcontainer/compose.override.yaml": "services:\n  app:\n    labels:\n      ${L}: x\n"}, branchbox.RuleInterpolatedValue, "services.app.labels"},
		{"duplicate service", map[string]string{"compose.yaml": goodCompose + "  app:\n    image: x\n"}, branchbox.RuleComposeFile, "compose.yaml"},
		{"not compose", map[string]string{"compose.yaml": "services: [1, 2]\n"}, branchbox.RuleComposeFile, "compose.yaml"},
		{"unknown attribute", map[string]string{"compose.yaml": goodCompose + "    no_such_attribute: 1\n"}, branchbox.RuleComposeFile, "compose.yaml"},
		{"too large", map[string]string{"compose.yaml": goodCompose + "# " + strings.Repeat("x", maxFile) + "\n"}, branchbox.RuleComposeFile, "compose.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := good()
			for k, v := range c.edit {
				if v == "" {
					delete(files, k)
				} else {
					files[k] = v
				}
			}
			_, err := Load(context.Background(), repo(t, files))
			if branchbox.RuleOf(err) != c.rule || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("got %v, want rule %s naming %s", err, c.rule, c.where)
			}
		})
	}
}

// TestSymlinkedInputsRefused: a devcontainer.json or Compose file that is
// a symlink, or a directory on the way, is never followed.
func TestSymlinkedInputsRefused(t *testing.T) {
	outside := repo(t, map[string]string{"compose.yaml": goodCompose})
	for _, link := range []string{"compose.yaml", ".devcontainer"} {
		t.Run(link, func(t *testing.T) {
			dir := repo(t, good())
			target := filepath.Join(outside, "compose.yaml")
			if link == ".devcontainer" {
				moved := filepath.Join(outside, "dc")
				if err := os.Rename(filepath.Join(dir, ".devcontainer"), moved); err != nil {
					t.Fatal(err)
				}
				target = moved
			}
			_ = os.Remove(filepath.Join(dir, link))
			if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
			_, err := Load(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("symlinked %s: got %v", link, err)
			}
		})
	}
}

// TestServiceImageBinding: service_images binds exactly the runnable
// services, each to an immutable reference (Contract: Preloaded service
// images: unknown, disabled, missing, tag-only, interpolated,
// URL-shaped and non-SHA-256 values are rejected).
func TestServiceImageBinding(t *testing.T) {
	in, err := Load(context.Background(), repo(t, good()))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		images map[string]string
		rule   branchbox.Rule
		where  string
	}{
		{"empty", map[string]string{}, branchbox.RuleServiceBinding, "service_images"},
		{"missing", map[string]string{"app": digestA}, branchbox.RuleServiceBinding, `"database"`},
		{"unknown", map[string]string{"app": digestA, "database": digestB, "web": digestA}, branchbox.RuleServiceBinding, "service_images.web"},
		{"disabled", map[string]string{"app": digestA, "database": digestB, "tools": digestA}, branchbox.RuleServiceBinding, "service_images.tools"},
		{"tag only", map[string]string{"app": "registry.example/team/app:1", "database": digestB}, branchbox.RuleServiceImage, "service_images.app"},
		{"interpolated", map[string]string{"app": "registry.example/${X}@sha256:" + strings.Repeat("a", 64), "database": digestB}, branchbox.RuleServiceImage, "service_images.app"},
		{"url", map[string]string{"app": "https://registry.example/a@sha256:" + strings.Repeat("a", 64), "database": digestB}, branchbox.RuleServiceImage, "service_images.app"},
		{"sha512", map[string]string{"app": digestA, "database": "registry.example/db@sha512:" + strings.Repeat("a", 128)}, branchbox.RuleServiceImage, "service_images.database"},
		{"upper case", map[string]string{"app": strings.ToUpper(digestB), "database": digestB}, branchbox.RuleServiceImage, "service_images.app"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckServiceImages(c.images, in.Project)
			if branchbox.RuleOf(err) != c.rule || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("got %v, want rule %s naming %s", err, c.rule, c.where)
			}
		})
	}
}

// TestComposeAllowList (Allow-list Compose): every key the allow-list does
// not pass is refused by rule compose-key naming the file, the service and
// the key, on the primary service and on another; values a key alone
// does not judge (a volume's type and source, a network entry, a label's
// prefix, a driver) too. A profile-gated service never runs and is not
// held to it; x-* extensions are inert and pass.
func TestComposeAllowList(t *testing.T) {
	const override = ".devcontainer/compose.override.yaml"
	svc := func(service, yaml string) map[string]string {
		return map[string]string{override: "services:\n  " + service + ":\n" + yaml}
	}
	type refusal struct {
		name  string
		edit  map[string]string
		where string
	}
	var cases []refusal
	for _, service := range []string{"app", "database"} {
		for _, k := range []string{"cap_add: [SYS_ADMIN]", "privileged: true", "devices: [\"/dev/kvm:/dev/kvm\"]", "pid: host",
			"network_mode: host", "ipc: host", "uts: host", "userns_mode: host", "cgroup: host", "cgroup_parent: /", "security_opt: [seccomp=unconfined]",
			"ports: [\"0.0.0.0:80:80\"]", "sysctls: {net.ipv4.ip_forward: 1}", "ulimits: {nofile: 1048576}", "use_api_socket: true",
			"volumes_from: [app]", "container_name: xx", "runtime: runc", "group_add: [docker]", "logging: {driver: syslog}",
			"dns: [10.0.0.1]", "gpus: all", "platform: linux/amd64", "external_links: [x]", "oom_score_adj: -1000", "deploy: {replicas: 2}",
			"storage_opt: {size: 1G}", "device_cgroup_rules: [\"c 1:3 mr\"]", "annotations: {a: b}", "post_start: [{command: id}]", "scale: 2",
			"isolation: default", "mac_address: 02:42:ac:11:00:02"} {
			key := k[:strings.Index(k, ":")]
			cases = append(cases, refusal{service + " " + key, svc(service, "    "+k+"\n"), override + ": services." + service + "." + key})
		}
	}
	cases = append(cases,
		refusal{"tmpfs on the primary", svc("app", "    tmpfs: [/scratch]\n"), override + ": services.app.tmpfs"},
		refusal{"a named volume on the primary", svc("app", "    volumes: [\"cache:/cache\"]\nvolumes:\n  cache: {}\n"), "services.app.volumes[0]"},
		refusal{"an image volume", svc("database", "    volumes: [{type: image, source: busybox, target: /i}]\n"), "services.database.volumes[0]"},
		refusal{"a volume's driver options", map[string]string{override: "volumes:\n  root:\n    driver_opts: {type: none, o: bind, device: /}\n"}, override + ": volumes.root.driver_opts"},
		refusal{"a volume's driver", map[string]string{override: "volumes:\n  v:\n    driver: nfs\n"}, "volumes.v.driver"},
		refusal{"an external volume", map[string]string{override: "volumes:\n  v:\n    external: true\n"}, override + ": volumes.v.external"},
		refusal{"a volume's name", map[string]string{override: "volumes:\n  v:\n    name: branchbox-other-workspace\n"}, override + ": volumes.v.name"},
		refusal{"an external network", map[string]string{override: "networks:\n  n:\n    external: true\n"}, override + ": networks.n.external"},
		refusal{"a network's ipam", map[string]string{override: "networks:\n  n:\n    ipam: {config: [{subnet: 10.203.0.0/16}]}\n"}, override + ": networks.n.ipam"},
		refusal{"a network's driver", map[string]string{override: "networks:\n  n:\n    driver: macvlan\n"}, "networks.n.driver"},
		refusal{"a fixed address", svc("database", "    networks:\n      n:\n        ipv4_address: 10.203.0.1\nnetworks:\n  n: {}\n"), "services.database.networks.n"},
		refusal{"a reserved label", svc("database", "    labels: {devcontainer.metadata: '[{\"privileged\": true}]'}\n"), "services.database.labels.devcontainer.metadata"},
		refusal{"BranchBox's label on a volume", map[string]string{override: "volumes:\n  v:\n    labels: {io.branchbox.run: other}\n"}, "volumes.v.labels.io.branchbox.run"},
		refusal{"a volume named like BranchBox's workspace", svc("database", "    volumes: [\"branchbox-workspace:/ws\"]\nvolumes:\n  branchbox-workspace: {}\n"), override + ": volumes.branchbox-workspace"},
		refusal{"a volume named like a BranchBox spool", map[string]string{override: "volumes:\n  Branchbox-spool-delivery_requests: {}\n"}, override + ": volumes.Branchbox-spool-delivery_requests"},
		refusal{"a network named like BranchBox's", map[string]string{override: "networks:\n  branchbox-net: {}\n"}, override + ": networks.branchbox-net"},
		refusal{"a service named like BranchBox's", map[string]string{override: "services:\n  branchbox-proxy:\n    image: x\n"}, override + ": services.branchbox-proxy"},
		refusal{"network_mode of its own service", svc("database", "    network_mode: service:database\n"), override + ": services.database.network_mode"},
		refusal{"network_mode of a container", svc("app", "    network_mode: container:abc\n"), override + ": services.app.network_mode"},
		refusal{"a top-level config", map[string]string{override: "configs:\n  c:\n    content: x\n"}, override + ": configs"},
		refusal{"a top-level model", map[string]string{override: "models:\n  m:\n    model: ai/x\n"}, override + ": models"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := good()
			for k, v := range c.edit {
				files[k] = v
			}
			_, err := Load(context.Background(), repo(t, files))
			var re *branchbox.RuleError
			if !errors.As(err, &re) || re.Rule != branchbox.RuleComposeKey || re.Where != c.where {
				t.Fatalf("got %v, want rule %s where %s", err, branchbox.RuleComposeKey, c.where)
			}
		})
	}
	// What passes: the allow-list's keys on both, a gated service's
	// anything, an extension.
	files := good()
	files[override] = `services:
  app:
    command: ["sleep", "infinity"]
    network_mode: service:database
    init: true
    cap_drop: [ALL]
    read_only: true
    x-anything: {privileged: true}
  database:
    volumes: [dbdata:/var/lib/data, {type: tmpfs, target: /scratch}, "./data:/bind-dropped"]
    networks:
      back:
        aliases: [db]
    labels: {team: data}
    tmpfs: [/run]
    healthcheck: {test: ["CMD", "true"]}
  tools:
    privileged: true
volumes:
  dbdata: {driver: local}
networks:
  back: {internal: true}
x-shared: {a: 1}
`
	if _, err := Load(context.Background(), repo(t, files)); err != nil {
		t.Fatalf("the allow-list's own keys: %v", err)
	}
}

// TestOuterTunnelConnectorDisabled (Contract: Preloaded service images,
// "Services that BranchBox disables as outer tunnel connectors are
// excluded"): a service marked x-branchbox-role: outer-tunnel-connector
// never runs (disabled, not held to the allow-list: it may ask for the
// host's network), service_images may not bind it and need not, and the
// primary may not be one.
func TestOuterTunnelConnectorDisabled(t *testing.T) {
	files := good()
	files[".devcontainer/compose.override.yaml"] = goodOverride + `  tunnel:
    image: vendor/connector
    network_mode: host
    x-branchbox-role: outer-tunnel-connector
  database:
    depends_on: [tunnel]
`
	in, err := Load(context.Background(), repo(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := in.Project.DisabledServices["tunnel"]; !ok || in.Project.Services["tunnel"].Name != "" {
		t.Fatalf("the tunnel connector is not disabled: runnable %v", in.Project.ServiceNames())
	}
	if err := CheckServiceImages(map[string]string{"app": digestA, "database": digestB}, in.Project); err != nil {
		t.Fatalf("a binding without the connector: %v", err)
	}
	err = CheckServiceImages(map[string]string{"app": digestA, "database": digestB, "tunnel": digestA}, in.Project)
	if branchbox.RuleOf(err) != branchbox.RuleServiceBinding || !strings.Contains(err.Error(), "service_images.tunnel") {
		t.Fatalf("binding the connector: %v", err)
	}
	files[".devcontainer/compose.override.yaml"] = goodOverride + "    x-branchbox-role: outer-tunnel-connector\n"
	if _, err := Load(context.Background(), repo(t, files)); branchbox.RuleOf(err) != branchbox.RuleDevcontainer || !strings.Contains(err.Error(), "not a runnable service") {
		t.Fatalf("a primary marked as a connector: %v", err)
	}
}
