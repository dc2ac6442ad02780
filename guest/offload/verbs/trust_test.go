package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// Contract: Offload, send steps: the trust preset for claude sets its two
// keys and keeps the user's other keys, their values and their order.
func TestTrustClaudeKeepsTheRest(t *testing.T) {
	home := t.TempDir()
	orig := `{"numStartups": 7, "theme": "dark", "projects": {"/other": {"allowedTools": ["Bash"], "hasTrustDialogAccepted": false}}, "zeta": {"nested": [1, 2, {"b": 1, "a": 2}]}}`
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte(orig), 0o600)
	if err := TrustClaude(home, "/workspace/proj"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(home, ".claude.json"))
	got := string(data)
	order := []string{`"numStartups": 7`, `"theme": "dark"`, `"projects"`, `"/other"`, `"allowedTools"`, `"/workspace/proj"`, `"hasTrustDialogAccepted": true`, `"zeta"`, `"b": 1`, `"a": 2`, `"hasCompletedOnboarding": true`}
	at := 0
	for _, w := range order {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", w, got)
		}
		at += i
	}
	if !strings.Contains(got, `"hasTrustDialogAccepted": false`) {
		t.Errorf("another project's trust changed:\n%s", got)
	}
	// A second preset changes nothing more.
	if err := TrustClaude(home, "/workspace/proj"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(home, ".claude.json")); string(again) != got {
		t.Errorf("a second preset changed the file")
	}
}

// A ~/.claude.json that is not JSON is left as it is, with an error.
func TestTrustClaudeLeavesABrokenFile(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".claude.json"), []byte("{broken"), 0o600)
	if err := TrustClaude(home, "/workspace/p"); err == nil {
		t.Fatal("a broken file was rewritten")
	}
	if data, _ := os.ReadFile(filepath.Join(home, ".claude.json")); string(data) != "{broken" {
		t.Fatalf("file changed: %q", data)
	}
}

// codex: [projects."<dir>"] trust_level = "trusted", the user's comments,
// keys and order as they were; the result parses and says that.
func TestTrustCodexKeepsCommentsAndOrder(t *testing.T) {
	for name, orig := range map[string]string{
		"new table":      "# my settings\nmodel = \"o3\" # the best\n\n[projects.\"/other\"]\ntrust_level = \"untrusted\"\n",
		"existing table": "model = \"o3\"\n[projects.\"/workspace/proj\"]\ntrust_level = \"untrusted\" # was\nother = 1\n\n[tui]\nx = 2\n",
		"table at end":   "[projects.\"/workspace/proj\"]\nother = 1",
		"no file":        "",
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			if orig != "" {
				os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
				os.WriteFile(filepath.Join(home, ".codex/config.toml"), []byte(orig), 0o600)
			}
			if err := TrustCodex(home, "/workspace/proj"); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(filepath.Join(home, ".codex/config.toml"))
			var cfg map[string]any
			if _, err := toml.Decode(string(data), &cfg); err != nil {
				t.Fatalf("not TOML: %v\n%s", err, data)
			}
			p := cfg["projects"].(map[string]any)["/workspace/proj"].(map[string]any)
			if p["trust_level"] != "trusted" {
				t.Fatalf("trust_level %v in\n%s", p["trust_level"], data)
			}
			for _, l := range strings.Split(orig, "\n") {
				if l != "" && !strings.Contains(l, "trust_level") && !strings.Contains(string(data), l) {
					t.Errorf("line %q lost:\n%s", l, data)
				}
			}
			if strings.Contains(orig, "/other") && cfg["projects"].(map[string]any)["/other"].(map[string]any)["trust_level"] != "untrusted" {
				t.Errorf("another project's trust changed")
			}
		})
	}
}
