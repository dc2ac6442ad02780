package inbox

import "testing"

// Contract: Offload, Box CLI in tmux: the MISE_<TOOL>_VERSION pins are
// variables a shell can export, whatever the tool's backend prefix.
func TestEnvName(t *testing.T) {
	for tool, want := range map[string]string{"go": "GO", "node": "NODE", "npm:cowsay": "NPM_COWSAY", "aqua:cli/cli": "AQUA_CLI_CLI", "python-3": "PYTHON_3"} {
		if got := envName(tool); got != want {
			t.Errorf("envName(%q) = %q, want %q", tool, got, want)
		}
	}
}
