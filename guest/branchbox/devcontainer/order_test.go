package devcontainer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// TestARefusalNamesTheFirstOffendingKeyInFileOrder (issue 38, Deliver
// 4): a repository with two offending keys is refused naming the one the
// file has first, the same on every run. Before, the Compose checks
// walked keys sorted by name (alpha before zeta, cap_add before
// privileged) and the devcontainer.json variable check walked a Go map
// (a different key from run to run).
func TestARefusalNamesTheFirstOffendingKeyInFileOrder(t *testing.T) {
	const override = ".devcontainer/compose.override.yaml"
	const config = ".devcontainer/devcontainer.json"
	for _, c := range []struct {
		name, file, body string
		rule             branchbox.Rule
		where            string
	}{
		{"services", override, "services:\n  zeta:\n    image: x\n    privileged: true\n  alpha:\n    image: x\n    cap_add: [ALL]\n", branchbox.RuleComposeKey, override + ": services.zeta.privileged"},
		{"keys of a service", override, "services:\n  database:\n    privileged: true\n    cap_add: [ALL]\n", branchbox.RuleComposeKey, override + ": services.database.privileged"},
		{"top-level keys", override, "volumes:\n  v: {driver_opts: {}}\nconfigs:\n  c: {content: x}\n", branchbox.RuleComposeKey, override + ": volumes.v.driver_opts"},
		{"interpolations", override, "services:\n  database:\n    environment:\n      ZED: $x\n      ALPHA: $y\n", branchbox.RuleInterpolatedValue, override + ": services.database.environment.ZED"},
		{"indirect includes", override, "services:\n  database:\n    label_file: l\n    env_file: e\n", branchbox.RuleIndirectInclude, override + ": services.database.label_file"},
		{"config variables", config, `{"dockerComposeFile": ["../compose.yaml", "compose.override.yaml"], "service": "app", "workspaceFolder": "/w", "remoteUser": "${localEnv:U}", "name": "${localEnv:N}", "containerEnv": {"Z": "${localEnv:Z}", "A": "${localEnv:A}"}}`, branchbox.RuleInterpolatedValue, config + ": remoteUser"},
		{"config keys", config, `{"dockerComposeFile": ["../compose.yaml", "compose.override.yaml"], "service": "app", "workspaceFolder": "/w", "runArgs": [], "appPort": 1}`, branchbox.RuleDevcontainer, config + ": runArgs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := good()
			files[c.file] = c.body
			dir := repo(t, files)
			for range 20 {
				_, err := Load(context.Background(), dir)
				var re *branchbox.RuleError
				if !errors.As(err, &re) || re.Rule != c.rule || re.Where != c.where {
					t.Fatalf("got %v, want rule %s at %s", err, c.rule, c.where)
				}
			}
		})
	}
	// The control: each of the offending keys alone is refused by name.
	files := good()
	files[override] = strings.Replace("services:\n  zeta:\n    image: x\n    privileged: true\n  alpha:\n    image: x\n    cap_add: [ALL]\n", "    privileged: true\n", "", 1)
	if _, err := Load(context.Background(), repo(t, files)); !strings.Contains(err.Error(), "services.alpha.cap_add") {
		t.Fatalf("alone: %v", err)
	}
}
