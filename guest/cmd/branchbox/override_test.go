package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// TestARepositoryValueCannotWriteTheCLIsComposeOverride (issue 38,
// Deliver 1): the Dev Containers CLI writes containerEnv as
// `- '<key>=<value>'` with the key unescaped and containerUser as
// `user: <value>` unquoted into its own Compose override. A key or user
// holding a quote and newlines added a bind of the guest's directory to
// the primary container, and the repository's postCreateCommand wrote
// there during up, before the final inspection refused the launch. Each
// is now refused before anything starts (rule devcontainer-config naming
// the field), nothing is written on the guest and nothing is left in the
// engine. The control: the same run launches with a plain key and user.
func TestARepositoryValueCannotWriteTheCLIsComposeOverride(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	guest := t.TempDir()
	if err := os.Chmod(guest, 0o1777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(guest, "written-by-the-repository")
	bind := "\n    volumes:\n      - " + guest + ":/guesttmp"
	for _, c := range []struct{ name, fields, where string }{
		{"a containerEnv key", `"containerEnv": {` + jsonString("A=1'"+bind+"\n    x-z: 'q") + `: "v"}`, ".devcontainer/devcontainer.json: containerEnv"},
		{"containerUser", `"containerUser": ` + jsonString("dev"+bind), ".devcontainer/devcontainer.json: containerUser"},
		{"a remoteEnv key", `"remoteEnv": {"A\nB": "v"}`, ".devcontainer/devcontainer.json: remoteEnv"},
		{"a containerEnv value with a control character", `"containerEnv": {"A": "1\u001b[2J"}`, ".devcontainer/devcontainer.json: containerEnv.A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			config := `{
  "dockerComposeFile": "compose.yaml",
  "service": "app",
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/app",
  "postCreateCommand": "touch /guesttmp/written-by-the-repository",
  ` + c.fields + `
}`
			defer func() {
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("the repository's command wrote %s on the guest", marker)
					os.Remove(marker)
				}
			}()
			launchConfigRefused(t, r, config, "devcontainer-config", c.where)
		})
	}
	control := strings.Replace(launchConfig, `"remoteUser": "dev",`, `"remoteUser": "dev", "containerUser": "dev", "containerEnv": {"A_1": "it's $x"},`, 1)
	launchConfigRefused(t, r, control, "", "")
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// launchConfigRefused writes config as run r's devcontainer.json and
// launches r as launchRefused does (with the plain Compose file).
func launchConfigRefused(t *testing.T, r *branchboxtest.Run, config, rule, where string) {
	t.Helper()
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	if err := os.WriteFile(filepath.Join(ws, ".devcontainer", "devcontainer.json"), []byte(config), 0o660); err != nil {
		t.Fatal(err)
	}
	launchRefused(t, r, composeExtra{}, rule, where)
}
