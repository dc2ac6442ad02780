package devcontainer

import (
	"context"
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
		{"too large", map[string]string{"compose.yaml": goodCompose + "# " + strings.Repeat("x", MaxFile) + "\n"}, branchbox.RuleComposeFile, "compose.yaml"},
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
