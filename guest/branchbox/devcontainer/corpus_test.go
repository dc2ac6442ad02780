package devcontainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// TestTheComposeTemplatesOfDevcontainersTemplates (issue 38, Must show):
// the 15 Compose-based templates of devcontainers/templates, as
// published (testdata/templates), each loaded as a repository: twelve are
// accepted (before issue 38 none was: workspaceFolder
// /workspaces/${localWorkspaceFolderBasename}, then network_mode:
// service:db and env_file: .env refused them), three refused by a rule
// docs/branchbox.md defends (a template that extends a Compose file the
// repository must already have; an uninstantiated ${templateOption:...};
// a fixed container_name).
func TestTheComposeTemplatesOfDevcontainersTemplates(t *testing.T) {
	refused := map[string]struct {
		rule  branchbox.Rule
		where string
	}{
		"docker-existing-docker-compose":   {branchbox.RuleComposeFile, "docker-compose.yml"},
		"docker-outside-of-docker-compose": {branchbox.RuleInterpolatedValue, ".devcontainer/devcontainer.json: features.ghcr.io/devcontainers/features/docker-outside-of-docker:1.version"},
		"java-postgres":                    {branchbox.RuleComposeKey, ".devcontainer/docker-compose.yml: services.app.container_name"},
	}
	dirs, err := filepath.Glob("testdata/templates/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		n++
		name := filepath.Base(d)
		t.Run(name, func(t *testing.T) {
			abs, err := filepath.Abs(d)
			if err != nil {
				t.Fatal(err)
			}
			in, err := LoadFor(context.Background(), abs, "/run/branchbox/state/run-demo/facade/devcontainer.json")
			want, isRefused := refused[name]
			if !isRefused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if ws := "/workspaces/" + name; in.Config.WorkspaceFolder != ws {
					t.Errorf("workspaceFolder %q, want %q", in.Config.WorkspaceFolder, ws)
				}
				return
			}
			var re *branchbox.RuleError
			if !errors.As(err, &re) || re.Rule != want.rule || re.Where != want.where {
				t.Fatalf("got %v, want rule %s at %s", err, want.rule, want.where)
			}
		})
	}
	if n != 15 {
		t.Fatalf("%d templates in testdata, want the 15 Compose-based ones", n)
	}
}
