package devcontainer

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// TestTheVariablesBranchBoxKnowsAreSubstituted (issue 38, Deliver 3):
// every Compose template of devcontainers/templates sets workspaceFolder
// to /workspaces/${localWorkspaceFolderBasename}, which was refused as an
// interpolated value. BranchBox now substitutes the variables it knows,
// before its checks (so each check sees the value the CLI would use), and
// refuses the ones it cannot know.
func TestTheVariablesBranchBoxKnowsAreSubstituted(t *testing.T) {
	files := good()
	files[".devcontainer/devcontainer.json"] = `{
  "dockerComposeFile": ["../compose.yaml", "compose.override.yaml"],
  "service": "app",
  "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}",
  "containerEnv": {"WS": "${containerWorkspaceFolder}", "BASE": "${containerWorkspaceFolderBasename}", "LOCAL": "${localWorkspaceFolder}", "ID": "${devcontainerId}"}
}`
	dir := repo(t, files)
	in, err := LoadFor(context.Background(), dir, "/run/branchbox/state/run-demo/facade/devcontainer.json")
	if err != nil {
		t.Fatal(err)
	}
	ws := "/workspaces/" + filepath.Base(dir)
	env := in.Config.Raw["containerEnv"].(map[string]any)
	if in.Config.WorkspaceFolder != ws || env["WS"] != ws || env["BASE"] != filepath.Base(dir) || env["LOCAL"] != dir {
		t.Fatalf("workspaceFolder %q, containerEnv %v", in.Config.WorkspaceFolder, env)
	}
	if id := (vars{local: dir, configFile: "/run/branchbox/state/run-demo/facade/devcontainer.json"}).devcontainerID(); env["ID"] != id {
		t.Fatalf("devcontainerId %v, want %s", env["ID"], id)
	}
	// The variables BranchBox cannot know, each named where it is.
	for _, c := range []struct{ field, where string }{
		{`"remoteEnv": {"H": "${localEnv:HOME}"}`, "remoteEnv.H"},
		{`"remoteEnv": {"P": "${containerEnv:PATH}"}`, "remoteEnv.P"},
		{`"postCreateCommand": "echo ${env:X}"`, "postCreateCommand"},
		{`"name": "${unknown}"`, "name"},
	} {
		files[".devcontainer/devcontainer.json"] = strings.Replace(goodConfig, `"service": "app",`, `"service": "app", `+c.field+",", 1)
		_, err := LoadFor(context.Background(), repo(t, files), "/x/devcontainer.json")
		var re *branchbox.RuleError
		if !errors.As(err, &re) || re.Rule != branchbox.RuleInterpolatedValue || re.Where != ".devcontainer/devcontainer.json: "+c.where {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	files[".devcontainer/devcontainer.json"] = strings.Replace(goodConfig, `"workspaceFolder": "/workspace"`, `"workspaceFolder": "${containerWorkspaceFolder}/x"`, 1)
	if _, err := LoadFor(context.Background(), repo(t, files), "/x/devcontainer.json"); branchbox.RuleOf(err) != branchbox.RuleInterpolatedValue {
		t.Errorf("workspaceFolder naming itself: %v", err)
	}
	files[".devcontainer/devcontainer.json"] = strings.Replace(goodConfig, `"service": "app",`, `"service": "app", "containerEnv": {"ID": "${devcontainerId}"},`, 1)
	if _, err := Load(context.Background(), repo(t, files)); branchbox.RuleOf(err) != branchbox.RuleInterpolatedValue {
		t.Errorf("${devcontainerId} without the facade's path: %v", err)
	}
}

// TestDevcontainerIDIsTheCLIs: the id of a fixed workspace and facade
// path is the Dev Containers CLI's (computed with its Q_ function in
// node: JSON.stringify of the id labels with sorted keys, SHA-256, base
// 32, padded to 52).
func TestDevcontainerIDIsTheCLIs(t *testing.T) {
	v := vars{local: "/srv/branchbox/workspaces/coding-demo", configFile: "/run/branchbox/state/run-demo/facade/devcontainer.json"}
	if got := v.devcontainerID(); got != "189d5almpiba4lllfh7qpmc4gf5k8qfdbqnb421it0451rnm0n5j" {
		t.Fatalf("devcontainerId %s", got)
	}
}
